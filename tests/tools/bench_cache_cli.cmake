# Runs a small `yoco bench-cache` and checks its JSON report: the hit restored the document's
# blocks (the tool itself checks that hit and miss sample the same first token); snapshots take
# fewer bytes per token than Transformer K/V. Times are only checked to be measured.
execute_process(COMMAND ${YOCO} bench-cache --params ${PARAMS} --json ${OUT}
                        --document-lengths 300,1024
                RESULT_VARIABLE rc OUTPUT_VARIABLE table ERROR_VARIABLE log)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "yoco bench-cache failed (${rc}): ${log}")
endif()
file(READ ${OUT} json)
string(JSON rows LENGTH "${json}" prefix_cache)
if(NOT rows EQUAL 2)
  message(FATAL_ERROR "expected 2 rows: ${json}")
endif()
string(JSON cached GET "${json}" prefix_cache 0 cached_tokens)
if(NOT cached EQUAL 256)
  message(FATAL_ERROR "a 300-token document caches its last full block (256): ${cached}")
endif()
string(JSON hit GET "${json}" prefix_cache 1 hit_ttft_ms)
string(JSON miss GET "${json}" prefix_cache 1 miss_ttft_ms)
string(JSON snap GET "${json}" prefix_cache 1 snapshot_bytes_per_token)
string(JSON tf GET "${json}" prefix_cache 1 transformer_bytes_per_token)
if(NOT hit GREATER 0 OR NOT miss GREATER 0 OR NOT tf GREATER snap)
  message(FATAL_ERROR "hit ${hit} ms, miss ${miss} ms, bytes/token ${snap} vs ${tf}")
endif()
