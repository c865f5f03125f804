"""`planc import`: plans from what users already have (a Keras `LayoutMap`, a keras-hub
`get_layout_map`, a Hugging Face `tp_plan`, a first-match rule list), proved equal.

- `importer`: `import_plan(source, ...) -> Imported`, which reads the source with one of
- `keras_map`, `hf_config` (with `planc.targets.torch.hf_styles`, what each style does
  to a parameter),
  `rule_list`, each reducing its source to a `draft.Draft`;
- `draft`: the draft written as a formatted, checked plan;
- `verify`: with a model, every variable's layout compared with the source's own;
- `jsonpos` (JSON with positions), `patterns` (P523), `meshspec` (`--mesh`), `problems`.
"""

from planc.importing.importer import Imported, import_plan
from planc.importing.problems import SourceProblem

__all__ = ["Imported", "SourceProblem", "import_plan"]
