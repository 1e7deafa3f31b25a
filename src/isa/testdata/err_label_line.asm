; expect: lenient 2:1: expected an instruction (upper-case mnemonic) or a comment, found 'loop:'
loop:
S_ADDI_INT gp1, gp0, 5
