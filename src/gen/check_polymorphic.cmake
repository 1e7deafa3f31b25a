# Source check of docs/lowering.md "Builder": polymorphic emitters are only
# called directly. Fails on (a) a name not immediately followed by '(',
# (b) a #define whose body names one, (c) a call whose second argument is
# neither a PLENA_STAGE_* literal nor an identifier named `stage`.
# Usage: cmake -DSRC_DIR=<src/gen> -P check_polymorphic.cmake
set(NAMES plena_moe_true_zero_rows plena_emit_copy_rows plena_emit_rmsnorm_rows
    plena_emit_mul_rows_by_row plena_moe_expert_activation plena_moe_broadcast_row_weights
    plena_moe_fp_zero_row_init)
file(GLOB SRCS ${SRC_DIR}/*.c)
list(FILTER SRCS EXCLUDE REGEX "/test_[^/]*\\.c$")
set(bad "")
foreach(f IN LISTS SRCS)
  file(STRINGS ${f} lines)
  set(n 0)
  foreach(line IN LISTS lines)
    math(EXPR n "${n}+1")
    foreach(name IN LISTS NAMES)
      if(line MATCHES "#[ \t]*define.*${name}")
        string(APPEND bad "${f}:${n}: #define names ${name}\n")
      endif()
      string(REGEX MATCHALL "${name}[^A-Za-z0-9_]?[^,]*,[^,)]*" hits "${line}")
      foreach(h IN LISTS hits)
        if(NOT h MATCHES "^${name}\\(")
          string(APPEND bad "${f}:${n}: ${name} not immediately followed by '('\n")
        elseif(h MATCHES "^${name}\\(struct plena_ctx")
          # the definition itself
        elseif(NOT h MATCHES "^${name}\\([^,]*,[ \t]*(PLENA_STAGE_[A-Z_]+|stage)[ \t]*$")
          string(APPEND bad "${f}:${n}: ${name}: second argument is not a PLENA_STAGE_* literal or 'stage': ${h}\n")
        endif()
      endforeach()
      if(line MATCHES "${name}[ \t]*$" OR line MATCHES "[&=][ \t]*${name}[^A-Za-z0-9_(]")
        string(APPEND bad "${f}:${n}: ${name} used without a direct call\n")
      endif()
    endforeach()
  endforeach()
endforeach()
if(bad)
  message(FATAL_ERROR "polymorphic emitter check failed:\n${bad}")
endif()
message(STATUS "polymorphic emitter check: ok")
