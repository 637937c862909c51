# Golden tests (tests/golden/run_golden.sh): diagnostics, the IR after each
# pass, and passes preserving semantics on the CPU executor.
set(NETC_GOLDEN ${CMAKE_CURRENT_SOURCE_DIR}/golden/run_golden.sh)
add_test(NAME golden_diag COMMAND bash ${NETC_GOLDEN} diag $<TARGET_FILE:netc> ${CMAKE_SOURCE_DIR})
add_test(NAME golden_ir COMMAND bash ${NETC_GOLDEN} ir $<TARGET_FILE:netc> ${CMAKE_SOURCE_DIR})
add_test(NAME golden_passes COMMAND bash ${NETC_GOLDEN} passes $<TARGET_FILE:netc> ${CMAKE_SOURCE_DIR})
add_test(NAME golden_run COMMAND bash ${NETC_GOLDEN} run $<TARGET_FILE:netc> ${CMAKE_SOURCE_DIR} $<TARGET_FILE:npy_digest>)
add_test(NAME nvrtc_examples COMMAND bash ${NETC_GOLDEN} nvrtc $<TARGET_FILE:netc> ${CMAKE_SOURCE_DIR})
# Every example and tests/gpu model through NVRTC, fused and not: 431 s of a loaded
# 2-core machine's build stage, past the 900 s default under ASan when loaded.
set_tests_properties(nvrtc_examples PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 1800)
add_test(NAME golden_count COMMAND bash ${NETC_GOLDEN} count ${CMAKE_SOURCE_DIR} 50)
set_tests_properties(golden_diag golden_ir golden_passes golden_run golden_count nvrtc_examples PROPERTIES LABELS "golden")
# The binary finds its standard library through the source tree, whatever the environment says.
set_tests_properties(golden_diag golden_ir golden_passes golden_run nvrtc_examples PROPERTIES ENVIRONMENT "NETC_STDLIB=${CMAKE_SOURCE_DIR}/stdlib")
