# Fixture of the js-tiktoken cross-check: installs js-tiktoken from npm into the build tree
# (once) and runs the reference script over the corpus.
if(NOT EXISTS ${OUT}/node_modules/js-tiktoken/package.json)
  execute_process(COMMAND npm install --no-audit --no-fund --prefix ${OUT} js-tiktoken@1.0.21
                  RESULT_VARIABLE rc OUTPUT_QUIET)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "npm install js-tiktoken failed (${rc})")
  endif()
endif()
# Node resolves packages next to the script, so run a copy placed beside node_modules.
configure_file(${SOURCE}/js_tiktoken_reference.mjs ${OUT}/js_tiktoken_reference.mjs COPYONLY)
execute_process(COMMAND node ${OUT}/js_tiktoken_reference.mjs ${SOURCE}/corpus.json ${OUT}
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the js-tiktoken reference script failed (${rc})")
endif()
