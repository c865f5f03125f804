"""What every `planc COMMAND --help` ends with: each option explained, the exit codes, an
example; and the did-you-mean for a mistyped command.

The dispatcher declares the options; `document(parser)` fills in the help of an option
declared without one (from `OPTION_HELP`) and appends `EPILOGS[command]` to the
command's own epilog. tests/cli/test_help.py fails when an option or a command is left
undocumented, so a new one needs an entry here (or a `help=` where it is declared), and
it runs each example from the repository's `plans/` and `examples/`, so an example must
run as written (with the exit code its text gives first: 0, or 1 for `diff`).

>>> "exit codes" in EPILOGS["lint"] and "example" in EPILOGS["lint"]
True
"""

from __future__ import annotations

import argparse
import textwrap

from planc.diagnostics.did_you_mean import closest

_EXIT_LINT = ("exit codes: 0 clean (warnings and notes allowed), 1 errors (or warnings with "
              "--strict), 2 a bad command line or an input that cannot be read, 141 the "
              "reader of standard output went away")

EPILOGS: dict[str, str] = {
    "lint": f"{_EXIT_LINT}\n\nexample:\n  planc lint plans/gemma.kd -D tp=2 --devices 8,64 \\\n"
            "      --model plans/models/gemma_2b.json",
    "diff": "exit codes: 0 the tables are identical, 1 they differ (or a plan has errors), "
            "2 a bad command line or an input that cannot be read\n\nexample:\n  planc diff "
            "examples/mlp_tp.kd examples/mlp_fsdp.kd \\\n      --model examples/mlp.json --devices 8",
    "fmt": "exit codes: 0 formatted (or already canonical), 1 with --check when a file "
           "would change, or a plan with errors (never rewritten), 2 a file that cannot "
           "be read or written\n\nexample:\n  planc fmt --check plans/*.kd",
    "explain": f"{_EXIT_LINT}\n\nexample:\n  planc explain plans/gemma.kd -D tp=2 --devices 8 "
               "\\\n      --model plans/models/gemma_2b.json",
    "compile": "exit codes: 0 written, 1 the plan has errors (nothing written), 2 a bad "
               "command line or an input that cannot be read\n\nexample:\n  planc compile "
               "plans/gemma.kd -D tp=2 --target jax -o gemma_plan.py",
    "inspect": "exit codes: 0 written, 2 the source cannot be read\n\nexample:\n  planc "
               "inspect examples/mlp.safetensors -o mlp.json",
    "suggest": "exit codes: 0 written, 1 no plan fits or the suggestion failed validation "
               "(nothing written), 2 a bad command line, an unreadable model, topology or "
               "step\n\nexample:\n"
               "  planc suggest --model plans/models/gemma_2b.json --devices 8 --budget 16GiB\n"
               "  planc suggest --search --step examples.search_step:build --topology cpu:8",
    "import": "exit codes: 0 written, 1 faults in the source or a layout that differs from "
              "it (nothing written), 2 a bad command line or an unreadable source\n\n"
              "example:\n  planc import plans/models/hf_llama_config.json --mesh "
              "dp=auto,tp=8 -o tp.kd",
    "launch": "exit codes: 0 every process succeeded, else the first failure's code (2 a "
              "bad command line)\n\nexample:\n  planc launch -n 2 --devices-per-process 4 "
              "-- python examples/train.py",
    "lsp": "exit codes: 0 when the editor shuts the server down, 2 when planc[lsp] is not "
           "installed\n\nexample:\n  planc lsp",
    "reshard": "exit codes: 0 written, 1 errors (nothing written), 2 a bad command line, an "
               "unreadable SRC, an existing DST, or a DST another writer holds (P427, P428)"
               "\n\nexample:\n  planc reshard "
               "examples/mlp.safetensors -o ckpt --plan examples/mlp_tp.kd \\\n      --devices 8",
    "cluster": "exit codes: 0 no preflight problem, 1 a preflight problem (or a plan with "
               "errors), 2 a bad command line or an unreadable plan\n\nexample:\n  planc "
               "cluster plans/gemma.kd -D tp=2",
    "code": "exit codes: 0 printed, 2 an unknown code\n\nexample:\n  planc code P301",
    "cost": "exit codes: 0 costed (and within budget(step)), 1 the plan, the step or a "
            "budget has an error, 2 a bad command line or input (an unknown topology, a "
            "--step that cannot be imported, a bad calibration file)\n\nexample:\n  planc cost "
            "examples/aot.kd --step examples.aot_step:build --topology cpu:8",
    "aot": "exit codes: 0 compiled (and within budget(peak)), 1 the plan, the step or the "
           "budget has an error, 2 a bad command line or input (an unknown topology, libtpu "
           "missing, a --step that cannot be imported)\n\nexample:\n  planc aot "
           "examples/aot.kd --step examples.aot_step:build --topology cpu:8",
}

# Help for options declared without any, by (command, dest), then by dest alone.
OPTION_HELP: dict[tuple[str, str] | str, str] = {
    "plans": "plan files (.kd)",
    "plan": "the plan file (.kd)",
    "source": "the model source: a checkpoint, manifest, Keras file or module:attr",
    "output": "write the output to FILE (atomically: complete or not at all)",
    "devices": "the device count (sizes an `auto` axis)",
    "model": "the model: a checkpoint, manifest, Keras file or module:attr",
    "color": "colour the output: auto (a terminal, unless NO_COLOR or TERM=dumb; "
             "FORCE_COLOR forces it), always or never",
    "format": "the output format",
    ("explain", "model"): "the model whose variables are laid out: a checkpoint, manifest, "
                          "Keras file or module:attr",
    ("compile", "model"): "validate against this model first; errors refuse the compile",
    ("compile", "target"): "jax (a module needing only jax), keras (a LayoutMap module), "
                           "torch (DTensor placements, a module needing only torch), hf (a "
                           "Hugging Face base_model_tp_plan) or json (the resolved plan as data)",
    ("suggest", "strategy"): "fsdp, tp, fsdp_tp, or auto (chosen from the model and devices)",
    ("launch", "processes"): "how many processes form the cluster",
    ("launch", "devices_per_process"): "simulated CPU devices in each process (default 1)",
    ("launch", "timeout"): "stop every process after SECONDS (default: no limit)",
    ("launch", "cmd"): "the command each process runs, after `--`",
    ("code", "code"): "a diagnostic code such as P301 (without one: every code and its title)",
}


class Formatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the epilog's lines (exit codes, the example) as written."""


TOP = ("exit codes: 0 clean, 1 the plan has errors (or warnings with --strict), 2 a bad "
       "command line or an input that cannot be read, 141 the reader of standard output "
       "went away; `planc COMMAND --help` for each command's\n\n"
       "example:\n  planc lint plans/gemma.kd --model plans/models/gemma_2b.json -D tp=2 "
       "--devices 8\n  planc code P301")


def document(parser: argparse.ArgumentParser) -> None:
    """Fill in missing option help and the epilogs of `parser` and its commands."""
    parser.formatter_class = Formatter
    parser.epilog = _wrapped(TOP)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                _document_command(name, sub)


def _document_command(name: str, sub: argparse.ArgumentParser) -> None:
    sub.formatter_class = Formatter
    for action in sub._actions:
        if action.help is None or action.help == "":
            action.help = OPTION_HELP.get((name, action.dest), OPTION_HELP.get(action.dest))
    extra = EPILOGS.get(name)
    if extra and (sub.epilog is None or extra not in sub.epilog):
        own = textwrap.fill(sub.epilog, 80) if sub.epilog else ""
        sub.epilog = "\n\n".join(t for t in (own, _wrapped(extra)) if t)


def _wrapped(text: str) -> str:
    """Each paragraph of `text` wrapped at 80 columns; indented lines (the example) kept."""
    return "\n".join(line if line.startswith("  ") else textwrap.fill(line, 80)
                     for line in text.split("\n"))


def command_hint(word: str, commands) -> str:
    """`planc lnit`: the usage error's did-you-mean."""
    near = closest(word, commands)
    return f"; did you mean `planc {near}`?" if near else ""
