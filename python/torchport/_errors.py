"""The one exception torchport raises for what it reads, writes or refuses."""

from __future__ import annotations

from typing import Optional


class TorchportError(Exception):
    """A refusal or failure of torchport's core, with where it happened.

    Attributes:
        code: what went wrong, coarse enough to branch on: "io",
            "not_a_checkpoint", "truncated", "corrupt", "unsupported",
            "limit_exceeded", "unsafe_global", "missing_key",
            "shape_mismatch", "dtype_mismatch", "invalid_argument",
            "ambiguous", "internal" (C++ ``torchport::ErrorCode``).
        message: what and why, without the code, file, key and offset.
        key: the key path concerned ("layer1.0.conv1.weight"), or "".
        offset: the byte offset in the input, or None.
        file: the file or record concerned, or "".

    ``str(error)`` is the whole line: ``[code] file: 'key': message (byte N)``.
    """

    def __init__(
        self,
        text: str,
        code: str = "internal",
        key: str = "",
        offset: Optional[int] = None,
        file: str = "",
        message: Optional[str] = None,
    ) -> None:
        super().__init__(text)
        self.code = code
        self.key = key
        self.offset = offset
        self.file = file
        self.message = text if message is None else message

    def __reduce__(self):  # picklable with its fields (multiprocessing)
        return (type(self), (str(self), self.code, self.key, self.offset, self.file, self.message))
