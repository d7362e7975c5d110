# Fixture of the tracing tests: installs OpenTelemetry JS's OTLP definitions from npm into the
# build tree (once), pinned, with the receiver script beside them (node resolves packages next
# to the script).
if(NOT EXISTS ${OUT}/node_modules/@opentelemetry/otlp-transformer/package.json)
  execute_process(COMMAND npm install --no-audit --no-fund --prefix ${OUT}
                          @opentelemetry/otlp-transformer@0.208.0
                  RESULT_VARIABLE rc OUTPUT_QUIET)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "npm install @opentelemetry/otlp-transformer failed (${rc})")
  endif()
endif()
configure_file(${SOURCE}/otlp_receiver.mjs ${OUT}/otlp_receiver.mjs COPYONLY)
