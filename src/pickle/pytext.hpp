#pragma once
// Python's text and number codecs the pickle VM reads with (pytext.cpp):
// internal to the pickle layer. Each throws Error(corrupt | unsupported |
// limit_exceeded) without an offset, which the VM adds; the string codecs
// return false for what Python's codec refuses.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "torchport/core/value.hpp"

namespace torchport::pickle::pytext {

/// PyLong_FromString(line, base 0 when `base0`, else 10): ASCII white space
/// around, a sign, with base 0 a 0x/0o/0b prefix, digits with single
/// underscores between; an Int when it fits 64 bits, else a BigInt. `what`
/// names the opcode for messages.
Value parse_long(std::string_view line, const char* what, bool base0);
/// INT's line, as the C unpickler reads it (strtol first, then
/// PyLong_FromString); a line of two characters that gives 0 or 1 is a bool.
Value parse_int(std::string_view line);
/// A decimal index (PUT, GET) that must fit 64 bits.
std::int64_t parse_decimal(std::string_view s, const char* what);
/// FLOAT's line, as PyOS_string_to_double reads the whole of it.
double parse_float(std::string_view line);
/// LONG1/LONG4's little-endian two's complement bytes, in the one form of
/// the number (sign bytes it does not need dropped).
Value long_from_bytes(std::span<const std::byte> b);
/// `complex(s)` of a str, as Python reads it: white space around, optional
/// parentheses, a real part, an imaginary part ending in j, or both
/// ("1+2j", "-j", "(3.5)", "infj"). False for what Python refuses.
bool parse_complex(std::string_view s, double& re, double& im);
/// The character a one-character escape of Python's string literals
/// stands for (`\\ \' \" \a \b \f \n \r \t \v`: `e` is the character
/// after the backslash), or -1 for any other.
int simple_escape(char e) noexcept;
/// The value of a hexadecimal digit, or -1.
int hex_digit(char c) noexcept;
/// STRING's quoted Python 2 literal, as codecs.escape_decode resolves it.
bool unescape_repr(std::string_view s, std::string& out);
/// UNICODE's raw-unicode-escape text, to UTF-8. False for what Python
/// refuses, and for a lone surrogate (a str in Python, which UTF-8 cannot
/// hold; `*surrogate` is set then).
bool raw_unicode_to_utf8(std::string_view s, std::string& out, bool* surrogate = nullptr);
/// The Latin-1 bytes of a UTF-8 string (false past U+00FF).
bool utf8_to_latin1(const std::string& in, std::string& out);

}  // namespace torchport::pickle::pytext
