; expect: lenient 3:3: unknown mnemonic 'S_FOO_INT'
S_ADDI_INT gp1, gp0, 5
  S_FOO_INT gp1, gp2, gp3
