"""The one exception type users see: a single line saying what, where, and what to do."""


class WolfError(Exception):
    """A user-facing error. str(err) is one line; the CLI prints it and exits non-zero.
    ``note``, when given, is a second line the CLI prints under it: what still works."""

    exit_code = 2

    def __init__(self, message: str, *, hint: str | None = None, note: str | None = None) -> None:
        self.message = message
        self.hint = hint
        self.note = note
        super().__init__(message if hint is None else f"{message} ({hint})")


class CommandError(WolfError):
    """An external command failed or timed out. ``tail`` holds its last output lines."""

    def __init__(
        self, message: str, *, tail: list[str] | None = None, log: str | None = None
    ) -> None:
        super().__init__(message)
        self.tail = tail or []
        self.log = log

    def details(self) -> str:
        """The multi-line form: the one-line message, the output tail, the log path."""
        lines = [self.message]
        lines += [f"  | {line}" for line in self.tail]
        if self.log:
            lines.append(f"  full log: {self.log}")
        return "\n".join(lines)
