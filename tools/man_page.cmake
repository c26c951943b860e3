# Writes torchport.1 from the tool's own help (run at build time:
# cmake -DTOOL=path/to/torchport -DOUT=path/to/torchport.1 -P man_page.cmake),
# so the man page says what --help says. help2man would do the same; this
# needs nothing beyond CMake.
execute_process(COMMAND "${TOOL}" --version OUTPUT_VARIABLE version OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${TOOL} --version failed")
endif()
string(REGEX REPLACE "^torchport " "" version "${version}")

# Text as roff: backslashes and leading dots or quotes escaped.
function(roff_text text out)
  string(REPLACE "\\" "\\e" text "${text}")
  string(REGEX REPLACE "(^|\n)([.'])" "\\1\\\\&\\2" text "${text}")
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

set(page ".TH TORCHPORT 1 \"\" \"torchport ${version}\" \"User Commands\"\n")
string(APPEND page ".SH NAME\ntorchport \\- read PyTorch checkpoints safely, without Python or libtorch\n")
string(APPEND page ".SH SYNOPSIS\n.B torchport\n\\fICOMMAND\\fR [\\fIOPTIONS\\fR] \\fIFILE\\fR...\n.br\n")
string(APPEND page ".B torchport help\n[\\fICOMMAND\\fR]\n")
execute_process(COMMAND "${TOOL}" help OUTPUT_VARIABLE top)
roff_text("${top}" top)
string(APPEND page ".SH DESCRIPTION\n.nf\n${top}.fi\n")
foreach(cmd inspect load convert diff scan)
  execute_process(COMMAND "${TOOL}" help ${cmd} OUTPUT_VARIABLE text RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${TOOL} help ${cmd} failed")
  endif()
  roff_text("${text}" text)
  string(APPEND page ".SH COMMAND: ${cmd}\n.nf\n${text}.fi\n")
endforeach()
string(APPEND page ".SH EXIT STATUS\n.TP\n.B 0\nsuccess: scan found every file clean, diff found the two equal\n")
string(APPEND page ".TP\n.B 1\nthe answer is no (scan: unsafe; diff: different), or, for inspect, load and convert, the input was refused\n")
string(APPEND page ".TP\n.B 2\ntrouble: usage errors, missing or unreadable inputs, and for scan and diff an input they cannot read to the end\n")
string(APPEND page ".SH SEE ALSO\nThe guide: docs/guide/8-cli.md in the source tree (installed to share/doc/torchport with the LICENSE).\n")
file(WRITE "${OUT}" "${page}")
