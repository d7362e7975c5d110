# Fixture of the OpenAI HTTP test: installs the official OpenAI SDK from npm into the build tree
# (once), pinned.
if(NOT EXISTS ${OUT}/node_modules/openai/package.json)
  execute_process(COMMAND npm install --no-audit --no-fund --prefix ${OUT} openai@6.30.1
                  RESULT_VARIABLE rc OUTPUT_QUIET)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "npm install openai failed (${rc})")
  endif()
endif()
