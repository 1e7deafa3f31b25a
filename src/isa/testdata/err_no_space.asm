; expect: lenient 2:1: unknown mnemonic 'S_ADD_INT,gp1'
S_ADD_INT,gp1
