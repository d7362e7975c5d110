# Fixture of the OpenAI HTTP test: installs the official OpenAI SDK from npm into the build tree
# (once), pinned, and ajv, the JSON Schema validator structured answers are checked with.
if(NOT EXISTS ${OUT}/node_modules/openai/package.json OR
   NOT EXISTS ${OUT}/node_modules/ajv/package.json)
  execute_process(COMMAND npm install --no-audit --no-fund --prefix ${OUT} openai@6.30.1 ajv@8.17.1
                  RESULT_VARIABLE rc OUTPUT_QUIET)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "npm install openai ajv failed (${rc})")
  endif()
endif()
