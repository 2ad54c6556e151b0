# tests/analyze/more.cmake: known-answer tests of compare, inefficient, decompose and
# fragmentation (included by this directory's CMakeLists.txt). Programs b_*.c land beside the
# other analysis programs; each b_<name>.sh is one ctest case, analyze_b_<name>, with the same
# environment as the test_*.sh cases (MEMSCOPE, PROGS, ANALYZE_SRC); goldens in golden/ and the
# JSON checker check_json.py, shared with them.
set(ms_an_b_progs b_steps b_pool b_ineff)
foreach(p ${ms_an_b_progs})
  add_executable(msan_${p} ${p}.c)
  set_target_properties(msan_${p} PROPERTIES OUTPUT_NAME ${p}
    RUNTIME_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  target_include_directories(msan_${p} PRIVATE ${PROJECT_SOURCE_DIR}/include)
  target_compile_options(msan_${p} PRIVATE -O0 -g -fno-omit-frame-pointer
    -fno-optimize-sibling-calls -fno-builtin-malloc -fno-builtin-free)
endforeach()

find_program(MS_AN_B_BASH bash)
find_program(MS_AN_B_SQLITE3 sqlite3)
find_program(MS_AN_B_PYTHON3 python3)
if(MS_AN_B_BASH AND MS_AN_B_SQLITE3)
  file(GLOB ms_an_b_tests CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/b_*.sh)
  foreach(script ${ms_an_b_tests})
    get_filename_component(name ${script} NAME_WE)
    add_test(NAME analyze_${name} COMMAND ${MS_AN_B_BASH} ${script})
    set_tests_properties(analyze_${name} PROPERTIES
      ENVIRONMENT "MEMSCOPE=$<TARGET_FILE:memscope>;PROGS=${CMAKE_CURRENT_BINARY_DIR};ANALYZE_SRC=${CMAKE_CURRENT_SOURCE_DIR};PYTHON3=${MS_AN_B_PYTHON3}"
      SKIP_RETURN_CODE 77
      TIMEOUT 300
      LABELS analyze)
  endforeach()
endif()
