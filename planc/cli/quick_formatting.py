"""argparse's formatters without the terminal measured while arguments are added: trick 2
of `planc.cli`'s start-up (see docs/architecture.md, "Lint's path")."""


class QuickFormatting:
    """Mixed into an `argparse.ArgumentParser`: no terminal measured while arguments are
    added (trick 2 of `planc.cli`)."""

    _adding = False

    def add_argument(self, *args, **kwargs):
        self._adding = True
        try:
            return super().add_argument(*args, **kwargs)
        finally:
            self._adding = False

    def _get_formatter(self):
        if self._adding:
            return self.formatter_class(prog=self.prog, width=80)
        return super()._get_formatter()


__all__ = ["QuickFormatting"]
