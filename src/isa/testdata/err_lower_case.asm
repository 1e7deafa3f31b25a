; expect: lenient 2:3: expected an instruction (upper-case mnemonic) or a comment, found 's_add_int'
  s_add_int gp1, gp2, gp3
