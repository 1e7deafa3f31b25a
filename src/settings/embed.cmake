# Writes OUT, a C source holding the bytes of IN (the reference settings file)
# as `plena_settings_reference_toml` plus a terminating NUL, and its length.
# Run at build time (cmake -P) so editing configs/plena_settings.toml rebuilds.
# Usage: cmake -DIN=<file> -DOUT=<file.c> -P embed.cmake
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" nhex)
math(EXPR nbytes "${nhex} / 2")
# 16 bytes per output line: break the hex text every 32 digits first.
string(REGEX REPLACE "(................................)" "\\1\n" hex "${hex}")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
set(src "/* Generated from configs/plena_settings.toml by src/settings/embed.cmake. Do not edit. */\n")
string(APPEND src "#include <stddef.h>\n")
string(APPEND src "const unsigned char plena_settings_reference_toml[] = {\n${body}0x00};\n")
string(APPEND src "const size_t plena_settings_reference_toml_len = ${nbytes};\n")
file(WRITE "${OUT}.tmp" "${src}")
file(RENAME "${OUT}.tmp" "${OUT}")
