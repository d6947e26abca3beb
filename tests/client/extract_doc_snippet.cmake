# Writes the ```cpp block that follows MARKER in DOC to OUT, so that a test
# can #include it and the documented code is compiled and run as written.
#   cmake -DDOC=docs/sdk.md -DMARKER="<!-- ... -->" -DOUT=snippet.inc -P extract_doc_snippet.cmake
# Fails (and so fails the build) when the marker or its block is missing.
file(READ "${DOC}" text)
string(FIND "${text}" "${MARKER}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${DOC}: no line '${MARKER}'")
endif()
string(SUBSTRING "${text}" ${at} -1 text)
string(FIND "${text}" "\n```cpp\n" open)
if(open EQUAL -1)
  message(FATAL_ERROR "${DOC}: no ```cpp block after '${MARKER}'")
endif()
math(EXPR open "${open} + 8")
string(SUBSTRING "${text}" ${open} -1 text)
string(FIND "${text}" "\n```" close)
if(close EQUAL -1)
  message(FATAL_ERROR "${DOC}: the ```cpp block after '${MARKER}' is not closed")
endif()
math(EXPR close "${close} + 1")
string(SUBSTRING "${text}" 0 ${close} snippet)
file(WRITE "${OUT}.tmp" "// Generated from ${DOC} by extract_doc_snippet.cmake: edit the doc.\n${snippet}")
# Rewrite only on a change, so the test recompiles only then.
configure_file("${OUT}.tmp" "${OUT}" COPYONLY)
file(REMOVE "${OUT}.tmp")
