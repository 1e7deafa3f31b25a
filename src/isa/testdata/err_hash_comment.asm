; expect: lenient 2:1: expected an instruction (upper-case mnemonic) or a comment, found '#'
# not a comment
