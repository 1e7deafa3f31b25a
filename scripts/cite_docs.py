#!/usr/bin/env python3
"""Rewrites citations of the specification outside the repository into citations of docs/.

    scripts/cite_docs.py [--dry-run] [--mentions] PATH...

Comments used to cite ../shared/spec: "spec/isa.md section 4", "isa.md 13.6",
"moe-lowering 8.2", "timing spec 3.1", "spec/numerics 2.1", "decision D5", "(D3)", and
short forms in a file whose header (first 20 lines) names the spec file: "section 2.1",
"spec 11.4", "(2.6)", "the formula of 7.5". Each becomes `docs/<file>.md "<Heading>"`,
the section of the manual that now explains the same thing, through the table MAPPING
below (where a spec section has two lines, the first is used). Lists and ranges ("7.4-7.6,
9") give one citation; all subsections of a chapter cite the chapter; more than three
headings of one file cite the file alone; "step N" is kept. A short form in parentheses
whose target the header comment or the same comment already cites is dropped
("/* ---- inputs (7.1) ---- */" becomes "/* ---- inputs ---- */"). When the header names
several spec files, a short form is rewritten only if one of them has the section.

PATH is a file or a directory (searched for .c .h .def .cmake .sh .toml .md, CMakeLists.txt
and Makefile; docs/ and tests/golden/expected/ are skipped). In C files only comments and
string literals change (a string literal gets \\" quotes); elsewhere only '#' comments, and
in Markdown the whole text. A comment line pushed past 100 columns is refilled with the
rest of its paragraph, never breaking a citation.

Everything left for a human goes to stderr as file:line: ...: citations it cannot map,
left as they are (a table row such as "spec 8 row 3", no section, an ambiguous short
form), what still looks like a spec citation (for example one split across two string
literals), a dotted number that may be a bare section, and rewritten lines it could not
keep within 100 columns. --mentions also lists comments that mention "the spec"
without a section. A line containing "cite_docs: keep" is left alone, with the line after
it (in C, up to the end of the statement after it). Exit status: 0 when nothing was left
for a human, 1 otherwise, 2 on a usage error. Afterwards: clang-format the changed C files,
regenerate the docs made from changed strings (ninja -C build docs trace-docs), and
re-record tests/golden when a --help text changed.
"""

import argparse
import difflib
import os
import re
import sys

LIMIT = 100

# spec section -> docs file and heading; "0" is the notation/conventions chapter.
MAPPING = """
spec/decisions.md D1 -> docs/architecture.md "Module graph"
spec/decisions.md D2 -> docs/machine.md "Deviations from the upstream emulator"
spec/decisions.md D3 -> docs/machine.md "C_SET_TOPK_REG and V_TOPK"
spec/decisions.md D4 -> docs/numerics.md "Floating-point environment"
spec/decisions.md D5 -> docs/profile.md "Stage vocabulary"
spec/decisions.md D6 -> docs/timing.md "Clock"
spec/decisions.md D7 -> docs/profile.md "Profile JSON"
spec/decisions.md D8 -> docs/lowering.md "Expert-major"
spec/decisions.md D9 -> docs/trace-schema.md "Fields"
spec/decisions.md D9 -> docs/replay.md "Gates"
spec/isa.md 0 -> docs/machine.md "Machine state"
spec/isa.md 1 -> docs/machine.md "Configuration"
spec/isa.md 2 -> docs/machine.md "Machine state"
spec/isa.md 2.1 -> docs/machine.md "Machine state"
spec/isa.md 2.2 -> docs/machine.md "Machine state"
spec/isa.md 2.3 -> docs/machine.md "Machine state"
spec/isa.md 2.4 -> docs/machine.md "Machine state"
spec/isa.md 2.5 -> docs/machine.md "Hardware loops"
spec/isa.md 3 -> docs/machine.md "Instruction word"
spec/isa.md 4 -> docs/isa.md "Opcodes"
spec/isa.md 4 -> docs/machine.md "Instruction classes"
spec/isa.md 5 -> docs/machine.md "Execution rules"
spec/isa.md 5.1 -> docs/machine.md "Execution rules"
spec/isa.md 5.2 -> docs/machine.md "Execution rules"
spec/isa.md 5.3 -> docs/machine.md "Execution rules"
spec/isa.md 5.4 -> docs/machine.md "Execution rules"
spec/isa.md 6 -> docs/machine.md "Matrix unit"
spec/isa.md 6 -> docs/numerics.md "Matrix accumulation order"
spec/isa.md 7 -> docs/machine.md "Vector unit"
spec/isa.md 7.1 -> docs/machine.md "Vector unit"
spec/isa.md 7.2 -> docs/machine.md "Vector unit"
spec/isa.md 7.3 -> docs/machine.md "Vector unit"
spec/isa.md 8 -> docs/machine.md "C_SET_TOPK_REG and V_TOPK"
spec/isa.md 8.1 -> docs/machine.md "C_SET_TOPK_REG and V_TOPK"
spec/isa.md 8.2 -> docs/machine.md "C_SET_TOPK_REG and V_TOPK"
spec/isa.md 9 -> docs/machine.md "Scalar unit"
spec/isa.md 10 -> docs/machine.md "Scalar unit"
spec/isa.md 11 -> docs/machine.md "HBM DMA"
spec/isa.md 11.1 -> docs/machine.md "HBM DMA"
spec/isa.md 11.2 -> docs/machine.md "HBM DMA"
spec/isa.md 11.3 -> docs/machine.md "HBM DMA"
spec/isa.md 11.4 -> docs/machine.md "HBM DMA"
spec/isa.md 12 -> docs/machine.md "Hardware loops"
spec/isa.md 12.1 -> docs/machine.md "Hardware loops"
spec/isa.md 13 -> docs/machine.md "Assembly syntax"
spec/isa.md 13.1 -> docs/machine.md "Assembly syntax"
spec/isa.md 13.2 -> docs/machine.md "Assembly syntax"
spec/isa.md 13.2 -> docs/profile.md "Stage attribution"
spec/isa.md 13.3 -> docs/isa.md "Operand forms"
spec/isa.md 13.4 -> docs/machine.md "Strict and lenient assembly"
spec/isa.md 13.5 -> docs/machine.md "Instruction classes"
spec/isa.md 13.5 -> docs/isa.md "Encoding classes"
spec/isa.md 13.6 -> docs/machine.md "Instruction word"
spec/isa.md 14 -> docs/machine.md "Traps"
spec/isa.md 14.1 -> docs/machine.md "Traps"
spec/isa.md 14.2 -> docs/machine.md "After a trap"
spec/isa.md 15 -> docs/lowering.md "Memory ABI"
spec/isa.md 16 -> docs/machine.md "Deviations from the upstream emulator"
spec/numerics-and-files.md 1 -> docs/numerics.md "Floating-point environment"
spec/numerics-and-files.md 2 -> docs/numerics.md "BF16"
spec/numerics-and-files.md 2.1 -> docs/numerics.md "BF16"
spec/numerics-and-files.md 2.2 -> docs/numerics.md "FP16"
spec/numerics-and-files.md 2.3 -> docs/numerics.md "BF16"
spec/numerics-and-files.md 3 -> docs/numerics.md "PLENA e4m3"
spec/numerics-and-files.md 3 -> docs/numerics.md "e8m0 scale"
spec/numerics-and-files.md 4 -> docs/numerics.md "MX decode"
spec/numerics-and-files.md 4.1 -> docs/numerics.md "MX decode"
spec/numerics-and-files.md 4.2 -> docs/numerics.md "Element quantizer"
spec/numerics-and-files.md 4.3 -> docs/numerics.md "MX encoders"
spec/numerics-and-files.md 4.4 -> docs/numerics.md "MX encoders"
spec/numerics-and-files.md 4.5 -> docs/numerics.md "MX encoders"
spec/numerics-and-files.md 4.6 -> docs/numerics.md "MX encoders"
spec/numerics-and-files.md 5 -> docs/numerics.md "OCP mode"
spec/numerics-and-files.md 6 -> docs/numerics.md "Matrix accumulation order"
spec/numerics-and-files.md 6 -> docs/numerics.md "Other arithmetic"
spec/numerics-and-files.md 7 -> docs/formats.md "HBM image"
spec/numerics-and-files.md 8 -> docs/formats.md "Machine code"
spec/numerics-and-files.md 9 -> docs/formats.md "SRAM and VRAM preload images"
spec/numerics-and-files.md 10 -> docs/formats.md "Dumps"
spec/numerics-and-files.md 11 -> docs/formats.md "Settings file"
spec/numerics-and-files.md 11.1 -> docs/formats.md "Settings file"
spec/numerics-and-files.md 11.2 -> docs/formats.md "Settings file"
spec/numerics-and-files.md 11.3 -> docs/formats.md "Settings file"
spec/numerics-and-files.md 11.4 -> docs/formats.md "Settings file"
spec/numerics-and-files.md 11.4 -> docs/machine.md "Configuration"
spec/numerics-and-files.md 11.5 -> docs/formats.md "Settings file"
spec/numerics-and-files.md 11.5 -> docs/timing.md "Per-instruction costs"
spec/numerics-and-files.md 11.6 -> docs/timing.md "HBM model"
spec/numerics-and-files.md 11.7 -> docs/formats.md "Settings file"
spec/numerics-and-files.md 11.8 -> docs/formats.md "Settings file"
spec/timing-and-profile.md 0 -> docs/timing.md "Determinism"
spec/timing-and-profile.md 0 I1-I6 -> docs/timing.md "Determinism"
spec/timing-and-profile.md 1 -> docs/timing.md "Clock"
spec/timing-and-profile.md 2 -> docs/timing.md "Per-instruction costs"
spec/timing-and-profile.md 2.1 -> docs/timing.md "Per-instruction costs"
spec/timing-and-profile.md 2.2 -> docs/timing.md "Per-instruction costs"
spec/timing-and-profile.md 3 -> docs/timing.md "HBM model"
spec/timing-and-profile.md 3.1 -> docs/timing.md "HBM model"
spec/timing-and-profile.md 3.2 -> docs/machine.md "HBM DMA"
spec/timing-and-profile.md 3.3 -> docs/timing.md "HBM model"
spec/timing-and-profile.md 3.4 -> docs/timing.md "HBM model"
spec/timing-and-profile.md 3.5 -> docs/timing.md "HBM model"
spec/timing-and-profile.md 3.6 -> docs/timing.md "HBM model"
spec/timing-and-profile.md 3.7 -> docs/timing.md "HBM model"
spec/timing-and-profile.md 3.8 -> docs/timing.md "HBM model"
spec/timing-and-profile.md 3.9 -> docs/timing.md "HBM model"
spec/timing-and-profile.md 3.10 -> docs/timing.md "HBM model"
spec/timing-and-profile.md 4 -> docs/timing.md "Timing gates"
spec/timing-and-profile.md 5 -> docs/timing.md "Overlap overlay"
spec/timing-and-profile.md 5.1 -> docs/timing.md "Overlap overlay"
spec/timing-and-profile.md 5.2 -> docs/timing.md "Overlap overlay"
spec/timing-and-profile.md 6 -> docs/profile.md "Stage attribution"
spec/timing-and-profile.md 6.1 -> docs/profile.md "Stage vocabulary"
spec/timing-and-profile.md 6.2 -> docs/profile.md "Stage attribution"
spec/timing-and-profile.md 6.3 -> docs/profile.md "Stage attribution"
spec/timing-and-profile.md 6.4 -> docs/profile.md "Stage attribution"
spec/timing-and-profile.md 6.5 -> docs/profile.md "Routed lowering"
spec/timing-and-profile.md 7 -> docs/profile.md "Profile JSON"
spec/timing-and-profile.md 7.1 -> docs/profile.md "Profile JSON"
spec/timing-and-profile.md 7.2 -> docs/profile.md "Profile JSON"
spec/timing-and-profile.md 7.3 -> docs/profile.md "Profile JSON"
spec/timing-and-profile.md 7.3 -> docs/timing.md "Overlap overlay"
spec/timing-and-profile.md 7.4 -> docs/profile.md "Profile JSON"
spec/timing-and-profile.md 7.5 -> docs/profile.md "Accumulator"
spec/timing-and-profile.md 7.6 -> docs/profile.md "Constant texts"
spec/timing-and-profile.md 7.7 -> docs/profile.md "Accumulator"
spec/timing-and-profile.md 7.7 -> docs/machine.md "After a trap"
spec/timing-and-profile.md 7.8 -> docs/profile.md "Shared-vs-routed split"
spec/timing-and-profile.md 7.8 -> docs/profile.md "Routing tax"
spec/timing-and-profile.md 7.9 -> docs/profile.md "Profile JSON"
spec/timing-and-profile.md 8 -> docs/cli.md "plena run"
spec/timing-and-profile.md 8.1 -> docs/cli.md "plena run"
spec/timing-and-profile.md 8.2 -> docs/timing.md "Summary lines"
spec/timing-and-profile.md 8.3 -> docs/cli.md "Exit codes"
spec/timing-and-profile.md 8.3 -> docs/architecture.md "Statuses and exit codes"
spec/timing-and-profile.md 8.4 -> docs/formats.md "Run-stats JSON"
spec/timing-and-profile.md 9 -> docs/timing.md "Timing gates"
spec/timing-and-profile.md 9.1 -> docs/timing.md "Timing gates"
spec/timing-and-profile.md 9.2 -> docs/timing.md "Timing gates"
spec/timing-and-profile.md 9.3 -> docs/timing.md "Timing gates"
spec/timing-and-profile.md 9.4 -> docs/timing.md "Timing gates"
spec/timing-and-profile.md 10 -> docs/timing.md "Timing gates"
spec/timing-and-profile.md T1-T11 -> docs/timing.md "Timing gates"
spec/moe-lowering.md 0 -> docs/lowering.md "Memory ABI"
spec/moe-lowering.md 1 -> docs/lowering.md "Builder"
spec/moe-lowering.md 1.1 -> docs/lowering.md "Builder"
spec/moe-lowering.md 1.2 -> docs/lowering.md "Builder"
spec/moe-lowering.md 1.2 -> docs/profile.md "Stage attribution"
spec/moe-lowering.md 1.3 -> docs/lowering.md "Builder"
spec/moe-lowering.md 1.4 -> docs/lowering.md "Builder"
spec/moe-lowering.md 1.5 -> docs/lowering.md "Builder"
spec/moe-lowering.md 1.5 -> docs/lowering.md "Memory ABI"
spec/moe-lowering.md 1.6 -> docs/lowering.md "Builder"
spec/moe-lowering.md 2 -> docs/lowering.md "Memory ABI"
spec/moe-lowering.md 2.1 -> docs/lowering.md "Memory ABI"
spec/moe-lowering.md 2.2 -> docs/lowering.md "Memory ABI"
spec/moe-lowering.md 2.3 -> docs/lowering.md "Memory ABI"
spec/moe-lowering.md 2.4 -> docs/lowering.md "Memory ABI"
spec/moe-lowering.md 2.5 -> docs/lowering.md "Memory ABI"
spec/moe-lowering.md 2.6 -> docs/lowering.md "Token blocks"
spec/moe-lowering.md 2.6 -> docs/lowering.md "Capacity"
spec/moe-lowering.md 3 -> docs/lowering.md "Layer steps"
spec/moe-lowering.md 3.1 -> docs/lowering.md "Layer steps"
spec/moe-lowering.md 3.2 -> docs/lowering.md "Layer steps"
spec/moe-lowering.md 3.3 -> docs/lowering.md "Layer steps"
spec/moe-lowering.md 3.3.1 -> docs/lowering.md "Layer steps"
spec/moe-lowering.md 3.3.2 -> docs/lowering.md "Layer steps"
spec/moe-lowering.md 3.3.3 -> docs/lowering.md "Layer steps"
spec/moe-lowering.md 3.3.4 -> docs/lowering.md "Layer steps"
spec/moe-lowering.md 3.3.5 -> docs/lowering.md "Layer steps"
spec/moe-lowering.md 3.3.6 -> docs/lowering.md "Layer steps"
spec/moe-lowering.md 3.3.7 -> docs/lowering.md "Layer steps"
spec/moe-lowering.md 3.3.8 -> docs/lowering.md "Layer steps"
spec/moe-lowering.md 3.3.9 -> docs/lowering.md "Layer steps"
spec/moe-lowering.md 3.3.10 -> docs/lowering.md "Layer steps"
spec/moe-lowering.md 3.3.11 -> docs/lowering.md "Layer steps"
spec/moe-lowering.md 4 -> docs/lowering.md "Routing"
spec/moe-lowering.md 5 -> docs/lowering.md "Layer steps"
spec/moe-lowering.md 5 -> docs/lowering.md "Model files"
spec/moe-lowering.md 6 -> docs/lowering.md "Model presets"
spec/moe-lowering.md 6.1 -> docs/lowering.md "Model files"
spec/moe-lowering.md 6.1 -> docs/formats.md "layout.json"
spec/moe-lowering.md 6.1 -> docs/formats.md "Build directory"
spec/moe-lowering.md 7 -> docs/lowering.md "Checking a build"
spec/moe-lowering.md 7.1 -> docs/lowering.md "Checking a build"
spec/moe-lowering.md 7.2 -> docs/lowering.md "Checking a build"
spec/moe-lowering.md 7.3 -> docs/lowering.md "Checking a build"
spec/moe-lowering.md 7.4 -> docs/lowering.md "Checking a build"
spec/moe-lowering.md 7.5 -> docs/lowering.md "Fault injection"
spec/moe-lowering.md 8 -> docs/lowering.md "Cost accounting"
spec/moe-lowering.md 8.1 -> docs/lowering.md "Cost accounting"
spec/moe-lowering.md 8.2 -> docs/lowering.md "Cost accounting"
spec/moe-lowering.md 8.3 -> docs/lowering.md "Expert-major"
spec/moe-lowering.md 9 -> docs/lowering.md "Builder"
spec/traces-and-replay.md 0 -> docs/cli.md "Commands"
spec/traces-and-replay.md 0.1 -> docs/cli.md "Commands"
spec/traces-and-replay.md 0.2 -> docs/cli.md "Exit codes"
spec/traces-and-replay.md 0.2 -> docs/replay.md "Exit status"
spec/traces-and-replay.md 0.3 -> docs/formats.md "Conventions"
spec/traces-and-replay.md 0.4 -> docs/replay.md "Identity"
spec/traces-and-replay.md 0.4 -> docs/replay.md "Volatile keys"
spec/traces-and-replay.md 0.5 -> docs/numerics.md "Pseudo-random numbers"
spec/traces-and-replay.md 1 -> docs/trace-schema.md "Fields"
spec/traces-and-replay.md 1.1 -> docs/trace-schema.md "Fields"
spec/traces-and-replay.md 1.2 -> docs/trace-schema.md "Fields"
spec/traces-and-replay.md 1.3 -> docs/trace-schema.md "Fields"
spec/traces-and-replay.md 1.4 -> docs/trace-schema.md "Semantic rules (validator only)"
spec/traces-and-replay.md 1.5 -> docs/trace-schema.md "Fields"
spec/traces-and-replay.md 1.6 -> docs/trace-schema.md "Semantic rules (validator only)"
spec/traces-and-replay.md 1.6 -> docs/profile.md "routing_stats"
spec/traces-and-replay.md 1.7 -> docs/trace-schema.md "Fields"
spec/traces-and-replay.md 1.8 -> docs/trace-schema.md "Fields"
spec/traces-and-replay.md 1.8 -> docs/replay.md "Pipeline"
spec/traces-and-replay.md 1.9 -> docs/trace-schema.md "Complete example"
spec/traces-and-replay.md 1.10 -> docs/replay.md "Campaigns"
spec/traces-and-replay.md 1.10 -> docs/trace-schema.md "Semantic rules (validator only)"
spec/traces-and-replay.md 2 -> docs/trace-schema.md "Validator findings"
spec/traces-and-replay.md 2.1 -> docs/trace-schema.md "Validator findings"
spec/traces-and-replay.md 2.1 -> docs/cli.md "plena trace validate"
spec/traces-and-replay.md 2.2 -> docs/trace-schema.md "Validator findings"
spec/traces-and-replay.md 2.3 -> docs/replay.md "Replay tier"
spec/traces-and-replay.md 2.4 -> docs/trace-schema.md "Validator findings"
spec/traces-and-replay.md 3 -> docs/cli.md "plena trace gen"
spec/traces-and-replay.md 3.1 -> docs/cli.md "plena trace gen"
spec/traces-and-replay.md 3.2 -> docs/cli.md "plena trace gen"
spec/traces-and-replay.md 3.3 -> docs/cli.md "plena trace import"
spec/traces-and-replay.md 3.4 -> docs/lowering.md "Model files"
spec/traces-and-replay.md 4 -> docs/cli.md "trace"
spec/traces-and-replay.md 4.1 -> docs/cli.md "trace"
spec/traces-and-replay.md 4.2 -> docs/cli.md "trace"
spec/traces-and-replay.md 4.3 -> docs/cli.md "trace"
spec/traces-and-replay.md 4.4 -> docs/cli.md "trace"
spec/traces-and-replay.md 4.5 -> docs/cli.md "trace"
spec/traces-and-replay.md 4.6 -> docs/cli.md "trace"
spec/traces-and-replay.md 4.7 -> docs/cli.md "trace"
spec/traces-and-replay.md 5 -> docs/replay.md "Pipeline"
spec/traces-and-replay.md 5.1 -> docs/replay.md "Pipeline"
spec/traces-and-replay.md 5.2 -> docs/replay.md "Pipeline"
spec/traces-and-replay.md 5.2 step 1 -> docs/replay.md "Pipeline"
spec/traces-and-replay.md 5.2 step 4 -> docs/replay.md "Pipeline"
spec/traces-and-replay.md 5.3 -> docs/replay.md "Gates"
spec/traces-and-replay.md 5.4 -> docs/replay.md "Pipeline"
spec/traces-and-replay.md 5.4 -> docs/formats.md "Build directory"
spec/traces-and-replay.md 5.5 -> docs/replay.md "results.json"
spec/traces-and-replay.md 5.6 -> docs/profile.md "Shared-vs-routed split"
spec/traces-and-replay.md 5.7 -> docs/profile.md "Routing tax"
spec/traces-and-replay.md 5.8 -> docs/replay.md "Exports"
spec/traces-and-replay.md 6 -> docs/replay.md "Gates"
spec/traces-and-replay.md 6.1 -> docs/replay.md "Gates"
spec/traces-and-replay.md 6.2 -> docs/timing.md "Timing gates"
spec/traces-and-replay.md 6.3 -> docs/replay.md "Gates"
spec/traces-and-replay.md 6.4 -> docs/replay.md "Gates"
spec/traces-and-replay.md 6.5 -> docs/replay.md "Pipeline"
spec/traces-and-replay.md 7 -> docs/replay.md "Campaigns"
spec/traces-and-replay.md 7.1 -> docs/replay.md "Campaigns"
spec/traces-and-replay.md 7.2 -> docs/replay.md "Campaigns"
spec/traces-and-replay.md 7.3 -> docs/replay.md "Campaigns"
spec/traces-and-replay.md 7.4 -> docs/replay.md "Campaigns"
spec/traces-and-replay.md 7.5 -> docs/replay.md "Campaigns"
spec/traces-and-replay.md 7.6 -> docs/replay.md "Campaigns"
spec/traces-and-replay.md 7.7 -> docs/replay.md "Campaigns"
spec/traces-and-replay.md 7.8 -> docs/replay.md "Differences from the upstream spec"
spec/traces-and-replay.md 7.9 -> docs/replay.md "Campaigns"
spec/traces-and-replay.md 8 -> docs/replay.md "Campaigns"
spec/traces-and-replay.md 8 -> docs/replay.md "Gates"
"""

SPEC_FILES = ("isa", "moe-lowering", "traces-and-replay", "timing-and-profile",
              "numerics-and-files", "decisions")

# A citation of a whole spec file ("spec/isa.md" without a section).
FILE_DOCS = {
    "isa": "docs/machine.md",
    "moe-lowering": "docs/lowering.md",
    "traces-and-replay": "docs/replay.md",
    "timing-and-profile": "docs/timing.md",
    "numerics-and-files": "docs/numerics.md",
}

# Short names: "timing spec 3.1", "numerics 6", "isa 14.2" and the misspelled "spec/numerics 2.1".
SHORT_NAMES = {
    "isa": "isa", "numerics": "numerics-and-files", "timing": "timing-and-profile",
    "traces": "traces-and-replay", "replay": "traces-and-replay", "moe": "moe-lowering",
    "lowering": "moe-lowering", "decisions": "decisions",
}

# More headings than this of one docs file: cite the file alone.
MAX_HEADINGS = 3


def load_mapping(text):
    """(spec file, section) -> [(doc, heading), ...], primary first."""
    table = {}
    line_re = re.compile(r'^spec/([a-z-]+)\.md (.+?) -> (docs/[a-z-]+\.md) "(.+)"$')
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = line_re.match(line)
        if not m:
            sys.exit("cite_docs: mapping line %d not understood: %s" % (n, line))
        spec, key, doc, heading = m.groups()
        keys = [re.sub(r' step \d+$', '', key)]
        r = re.match(r'^(?:\d+ )?([A-Z])(\d+)-[A-Z](\d+)$', key)  # T1-T11, 0 I1-I6
        if r:
            keys = ["%s%d" % (r.group(1), i) for i in range(int(r.group(2)), int(r.group(3)) + 1)]
        for k in keys:
            targets = table.setdefault((spec, k), [])
            if (doc, heading) not in targets:
                targets.append((doc, heading))
    return table


def check_headings(table, root):
    """Warns about mapping targets docs/ no longer has (the docs may have moved on)."""
    headings = {}
    for targets in table.values():
        for doc, heading in targets:
            if doc not in headings:
                try:
                    with open(os.path.join(root, doc), encoding="utf-8") as f:
                        headings[doc] = {l.lstrip("#").strip() for l in f if l.startswith("#")}
                except OSError:
                    headings[doc] = None
            if headings[doc] is not None and heading not in headings[doc]:
                print('cite_docs: warning: %s has no heading "%s"' % (doc, heading),
                      file=sys.stderr)
                headings[doc].add(heading)


# ---- the citation grammar -------------------------------------------------------------------

SEC = r'(?:\d+(?:\.\d+)*|[TDI]\d+)'
# between two words of a citation: blanks, or a line break inside a comment
SP = r'(?:[ \t]+|[ \t]*\n[ \t]*(?:\*(?!/)|//|#)?[ \t]*)'
LISTSEP = r'(?:[ \t]*(?:,|/|-|–)' + SP + r'?|' + SP + r'(?:and|or)' + SP + r')'
SECLIST = SEC + r'(?:' + LISTSEP + SEC + r')*'
# " section 4", " sections 1 and 3.1", " 4", " 8.2 step 3", " 8 row"
SECTIONS = (r'(?:' + SP + r'(?:[Ss]ections?' + SP + r'|§)?(?P<secs>' + SECLIST + r')(?!\.\d)'
            r'(?P<step>' + SP + r'step' + SP + r'\d+)?(?P<rows>' + SP + r'rows?\b)?)')
NAMES = "|".join(re.escape(n) for n in SPEC_FILES)

CITATION = re.compile(
    r'(?<![\w/.-])(?:'
    # spec/isa.md, ../shared/spec/isa.md, shared/spec/isa.md, spec/numerics
    r'(?:\.\./)?(?:shared/)?spec/(?P<path>' + NAMES + r'|numerics|timing|traces)(?:\.md)?(?![\w-])'
    # isa.md, moe-lowering.md (never docs/isa.md: the look-behind)
    r'|(?P<file>' + NAMES + r')\.md(?![\w-])'
    # moe-lowering 8.2, traces-and-replay 6.3, numerics 6, isa 14.2: a section must follow
    r'|(?P<bare>moe-lowering|traces-and-replay|timing-and-profile|numerics-and-files|numerics|isa)'
    r'(?=' + SP + r'\d)'
    # timing spec 3.1, numerics spec section 11.3, the traces spec
    r'|(?P<short>isa|numerics|timing|traces|replay|moe|lowering)' + SP + r'spec(?![\w-])'
    # spec 11.4, Spec 8.2, spec section 1.9: a file the header names
    r'|(?P<spec>[Ss]pec)(?=' + SP + r'(?:[Ss]ections?' + SP + r')?\d)'
    # section 2.1, sections 2-5: a file the header names
    r'|(?P<section>[Ss]ections?)(?=' + SP + r'\d)'
    # (design) decision D5
    r'|(?:[Dd]esign' + SP + r')?(?P<decision>decisions?)(?=' + SP + r'D\d)'
    r')' + SECTIONS + r'?')

# "(2.6)", "(1.3, 1.4)", "(4.2; ...": dotted section numbers opening a parenthesis
PAREN = re.compile(r'(?<=\()(?P<secs>\d+\.\d+(?:\.\d+)*(?:' + LISTSEP + r'\d+(?:\.\d+)+)*)'
                   r'(?=[);,:]| and | or )')
DECISION = re.compile(r'(?<=\()(?P<secs>D\d)(?=\))')
# "the formula of 7.5", "/* 3.8: ...", "in 11.4 order": a bare section number after a cue word
# or opening a comment; never one followed by a unit ("7.5 ns") or preceded by a value word
CUED = re.compile(r'(?:(?<=\bof )|(?<=\bin )|(?<=\bsee )|(?<=\bper )|(?<=\bunder )|'
                  r'(?<=/\* )|(?<=^ \* )|(?<=^\* )|(?<=^# ))'
                  r'(?P<secs>\d+\.\d+(?:\.\d+)?(?:' + LISTSEP + r'\d+\.\d+(?:\.\d+)?)*)'
                  r'(?![\w%]|\.\d| ?(?:ns|ps|ms|s|x|GB|MB|KB|cycles|bytes)\b)', re.M)

# what still looks like a citation after the rewrite
RESIDUAL = re.compile(
    r'spec/|(?<![\w/.-])(?:' + NAMES + r')\.md\b|\b(?:moe-lowering|traces-and-replay|'
    r'timing-and-profile|numerics-and-files)\b|\b[Ss]pec(?: section)? \d|\bdecisions? D\d|\(D\d\)'
    r'|\b(?:isa|numerics|timing|traces|moe) spec\b|\b(?:numerics|isa) \d')
MENTION = re.compile(r'\b(?:spec|specification)(?:\'s)?\b(?![_-])')
# a dotted number that may be a section ("1.10 order", "the formula of 7.5")
BARE = re.compile(r'(?<![\w.])\d+\.\d+(?:\.\d+)?(?!\w|\.\w)')
# ... but not one that reads as a value: "gini 0.5", "= 0.5", "zipf:1.2", "7.5 ns", "0.5%"
VALUE_BEFORE = re.compile(
    r'(?:[-=:\[{,"^+/]|\b(?:gini|factor|median|at|u|FIPS [\d-]+ section))\s?$')
VALUE_AFTER = re.compile(r'%|f\b|"| ?(?:ns|ps)\b| (?:truncates|gives)\b')
# "FIPS 180-4 section 6.2" cites another document
FOREIGN = re.compile(r'(?:FIPS|RFC|IEEE|ISO|POSIX|C11|C99)[\w .-]{0,12}$')
# a citation this script writes
QUOTED = r'(?:"[^"\n]+"|\\"[^"\n]+?\\")'
RENDERED = re.compile(r'(?P<doc>docs/[a-z-]+\.md)(?P<heads> ' + QUOTED + r'(?:(?:, | and )' +
                      QUOTED + r')*)?')


def expand(secs):
    """'7.4-7.6, 9' -> ['7.4', '7.5', '7.6', '9']."""
    secs = re.sub(r'\n[ \t]*(?:\*|//|#)?', ' ', secs)
    items = [p for p in re.split(r'\s*(,|/|-|–|\band\b|\bor\b)\s*', secs.strip()) if p.strip()]
    out, i = [], 0
    while i < len(items):
        a = items[i]
        if i + 2 < len(items) and items[i + 1] in ("-", "–"):
            b = items[i + 2]
            ra = re.match(r'^([A-Z]?)((?:\d+\.)*)(\d+)$', a)
            rb = re.match(r'^([A-Z]?)((?:\d+\.)*)(\d+)$', b)
            if ra and rb and ra.group(1) == rb.group(1) and ra.group(2) == rb.group(2):
                lo, hi = int(ra.group(3)), int(rb.group(3))
                out += ["%s%s%d" % (ra.group(1), ra.group(2), k) for k in range(lo, hi + 1)]
            else:
                out += [a, b]
            i += 3
            continue
        if a not in (",", "/", "and", "or", "-", "–"):
            out.append(a)
        i += 1
    return out


def lookup(table, spec, sec, exact=False):
    """Targets of one section; a subsection the table lacks falls back to its parent."""
    while True:
        if (spec, sec) in table:
            return table[(spec, sec)]
        if exact or "." not in sec:
            return None
        sec = sec.rsplit(".", 1)[0]


def collapse(table, spec, secs):
    """Every subsection of a chapter cited (13.1-13.6): cite the chapter (13) instead."""
    out = list(secs)
    for sec in secs:
        parent = sec.rsplit(".", 1)[0] if "." in sec else None
        if parent is None or (spec, parent) not in table:
            continue
        subs = {k for (s, k) in table if s == spec and k.startswith(parent + ".") and
                k.count(".") == parent.count(".") + 1}
        if subs and subs <= set(out):
            at = min(out.index(k) for k in subs)
            out = [k for k in out if k not in subs]
            out.insert(at, parent)
    return out


def render(targets, quote):
    """[(doc, heading or None)] -> 'docs/a.md "X" and "Y", docs/b.md "Z"'."""
    groups = []
    for doc, heading in targets:
        group = next((g for g in groups if g[0] == doc), None)
        if group is None:
            group = [doc, []]
            groups.append(group)
        if heading not in group[1]:
            group[1].append(heading)
    out = []
    for doc, heads in groups:
        if None in heads or len(heads) > MAX_HEADINGS:
            out.append(doc)
            continue
        hs = [quote + h + quote for h in heads]
        if len(hs) > 1:
            hs = [", ".join(hs[:-1]) + " and " + hs[-1]]
        out.append(doc + " " + hs[0])
    return ", ".join(out)


def parse_rendered(m):
    heads = re.findall(QUOTED, m.group("heads") or "")
    return m.group("doc"), [h.replace('\\"', '"')[1:-1] for h in heads]


MARK = "\x01"  # in front of each rewritten citation, followed by the old line's width


def merge_adjacent(text):
    """'docs/a.md "X", docs/a.md "Y"' -> 'docs/a.md "X" and "Y"' (one file cited twice in a
    row, as two spec citations next to each other give)."""
    pat = re.compile(RENDERED.pattern + r'(?P<sep>, | and )(?:\x01.)?' +
                     RENDERED.pattern.replace("?P<doc>", "?P<doc2>").replace("?P<heads>",
                                                                             "?P<heads2>"))
    while True:
        for m in pat.finditer(text):
            if m.group("doc") != m.group("doc2"):
                continue
            quote = '\\"' if '\\"' in m.group(0) else '"'
            d1 = parse_rendered(RENDERED.match(m.group(0)))
            second = m.group(0)[m.start("doc2") - m.start():]
            d2 = parse_rendered(RENDERED.match(second))
            heads = d1[1] + [h for h in d2[1] if h not in d1[1]]
            if not d1[1] or not d2[1]:
                heads = [None]
            new = render([(d1[0], h) for h in heads], quote)
            text = text[:m.start()] + new + text[m.end():]
            break
        else:
            return text


# ---- where a citation may be rewritten ------------------------------------------------------

CODE, COMMENT, STRING = 0, 1, 2
C_EXT = (".c", ".h", ".def")
HASH_NAMES = ("CMakeLists.txt", "Makefile")
EXTENSIONS = C_EXT + (".cmake", ".sh", ".toml", ".md")


def c_kinds(text):
    """Kind of every character of C text: code, comment (/* */ and //) or string literal."""
    kinds = bytearray(len(text))
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            kinds[i:j] = bytes([COMMENT]) * (j - i)
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            kinds[i:j] = bytes([COMMENT]) * (j - i)
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            if c == '"':
                kinds[i:j] = bytes([STRING]) * (j - i)
            i = j
        else:
            i += 1
    return kinds


def hash_kinds(text):
    """'#' comments of CMake, shell, TOML and Makefiles: from a '#' at the start of a line or
    after a blank, outside quotes, to the end of the line; a line break between two comment
    lines belongs to the comment."""
    kinds = bytearray(len(text))
    pos, prev = 0, False
    for line in text.split("\n"):
        quote, here = None, False
        for k, c in enumerate(line):
            if quote:
                if c == quote:
                    quote = None
            elif c in "\"'" and line[:k].strip():
                quote = c
            elif c == "#" and (k == 0 or line[k - 1] in " \t"):
                whole = not line[:k].strip()
                start = pos if whole and prev else pos + k
                kinds[start:pos + len(line)] = bytes([COMMENT]) * (pos + len(line) - start)
                here = whole
                break
        if here and pos > 0 and prev:
            kinds[pos - 1] = COMMENT
        prev = here
        pos += len(line) + 1
    return kinds


def classify(path, text):
    if path.endswith(C_EXT):
        return c_kinds(text)
    if path.endswith(".md"):
        return bytearray([COMMENT]) * len(text)
    return hash_kinds(text)


def wanted(path):
    return os.path.basename(path) in HASH_NAMES or path.endswith(EXTENSIONS)


# ---- one file -------------------------------------------------------------------------------

class Edit:
    def __init__(self, start, end, text, targets, droppable):
        self.start, self.end, self.text = start, end, text
        self.shown = shown(targets)   # (doc, heading or None) the text cites
        self.droppable = droppable    # a short form that is all there is between " (" and ")"


def shown(targets):
    """What render() shows of targets: (doc, heading), or (doc, None) for a file alone."""
    heads = {}
    for doc, heading in targets:
        heads.setdefault(doc, set()).add(heading)
    return {(doc, h) for doc, hs in heads.items()
            for h in ([None] if None in hs or len(hs) > MAX_HEADINGS else hs)}


class File:
    def __init__(self, path, text, table, problems):
        self.path, self.text, self.table, self.problems = path, text, table, problems
        self.kinds = classify(path, text)
        self.unmapped = []
        self.keep = set()
        lines = text.split("\n")
        for n, line in enumerate(lines, 1):
            if "cite_docs: keep" in line:
                # this line and the next, or in C the statement that follows the comment
                last = n + 1
                if path.endswith(C_EXT):
                    last = next((k for k in range(n + 1, min(n + 8, len(lines)) + 1)
                                 if lines[k - 1].rstrip().endswith(";")), n + 1)
                self.keep |= set(range(n, last + 1))
        self.named = self.header_specs()

    def line_of(self, pos):
        return self.text.count("\n", 0, pos) + 1

    def problem(self, pos, msg, snippet):
        snippet = re.sub(r'\s+', ' ', snippet).strip()
        self.unmapped.append(snippet)
        self.problems.append("%s:%d: %s: %s" % (self.path, self.line_of(pos), msg, snippet))

    def header_specs(self):
        """The spec files the header (first 20 lines) names, in order: what a bare
        "section 2.6", "spec 3.1" or "(2.6)" further down refers to."""
        head = "\n".join(self.text.split("\n")[:20])
        named = []
        for m in CITATION.finditer(head):
            spec = self.named_spec(m)
            if spec and spec != "decisions" and spec not in named:
                named.append(spec)
        return named

    @staticmethod
    def named_spec(m):
        if m.group("path"):
            return SHORT_NAMES.get(m.group("path"), m.group("path"))
        if m.group("file"):
            return m.group("file")
        if m.group("bare"):
            return SHORT_NAMES.get(m.group("bare"), m.group("bare"))
        if m.group("short"):
            return SHORT_NAMES[m.group("short")]
        if m.group("decision"):
            return "decisions"
        return None

    def implied_spec(self, secs, pos, snippet):
        """The spec file of a short citation: the one the header names, or of several the
        only one that has every section cited."""
        if not self.named:
            self.problem(pos, "cannot map (no spec file named in the header)", snippet)
            return None
        if len(self.named) == 1:
            return self.named[0]
        fits = [s for s in self.named
                if all(lookup(self.table, s, k, exact=True) for k in expand(secs))]
        if len(fits) == 1:
            return fits[0]
        self.problem(pos, "cannot map (the header names %s)" % " and ".join(fits or self.named),
                     snippet)
        return None

    def region(self, pos):
        """The comment or string literal around pos, as (start, end)."""
        kind, a, b = self.kinds[pos], pos, pos
        while a > 0 and self.kinds[a - 1] == kind:
            a -= 1
        while b < len(self.text) and self.kinds[b] == kind:
            b += 1
        return a, b

    def cited_spans(self):
        return [(c.start(), c.end()) for c in RENDERED.finditer(self.text)]

    def kind_of(self, start, end):
        ks = set(self.kinds[start:end])
        return ks.pop() if len(ks) == 1 else None

    def targets(self, spec, secs, exact=False):
        out = []
        for sec in collapse(self.table, spec, expand(secs)):
            t = lookup(self.table, spec, sec, exact)
            if not t:
                return None
            out.append(t[0])
        return out

    def citation(self, m, found):
        start, end = m.start(), m.end()
        kind = self.kind_of(start, end)
        if kind is None and m.group("path"):
            self.problem(start, "citation spans code and comment", m.group(0))
        if kind not in (COMMENT, STRING) or self.line_of(start) in self.keep:
            return
        if FOREIGN.search(self.text[max(0, start - 24):start]):
            return
        secs, snippet = m.group("secs"), m.group(0)
        spec = self.named_spec(m)
        if m.group("rows"):
            self.problem(start, "cannot map (a table row the docs do not have)", snippet)
            return
        if spec is None:
            spec = self.implied_spec(secs, start, snippet)
            if spec is None:
                return
        if secs is None:
            if spec not in FILE_DOCS or m.group("short"):
                self.problem(start, "cannot map (no section)", snippet)
                return
            targets = [(FILE_DOCS[spec], None)]
        else:
            targets = self.targets(spec, secs)
            if targets is None:
                self.problem(start, "cannot map (section not in the table)", snippet)
                return
        text = render(targets, '\\"' if kind == STRING else '"')
        if m.group("step") and len(expand(secs)) == 1:
            text += " " + re.sub(r'\s+', ' ', m.group("step")).strip()
        short = bool(m.group("spec") or m.group("section"))
        droppable = short and self.text[start - 2:start] == " (" and self.text[end:end + 1] == ")"
        # "the timing spec 3.1" -> "docs/timing.md ...", not "the docs/timing.md ..."
        if (m.group("short") or m.group("spec")) and re.search(
                r'\b[Tt]he $', self.text[max(0, start - 4):start]):
            start -= 4
        found.append(Edit(start, end, text, targets, droppable))

    def short_form(self, m, regex, found):
        kind = self.kind_of(m.start(), m.end())
        if kind not in (COMMENT, STRING) or self.line_of(m.start()) in self.keep:
            return
        if regex is CUED and kind != COMMENT:
            return
        if regex is DECISION:
            spec = "decisions"
        elif not self.named:
            return
        else:
            fits = [s for s in self.named if self.targets(s, m.group("secs"), exact=True)]
            if len(fits) != 1:
                if fits:
                    self.problem(m.start(), "cannot map (the header names %s)" %
                                 " and ".join(fits), m.group(0))
                return
            spec = fits[0]
        targets = self.targets(spec, m.group("secs"), exact=True)
        if targets:
            droppable = (self.text[m.start() - 2:m.start()] == " (" and
                         self.text[m.end():m.end() + 1] == ")")
            found.append(Edit(m.start(), m.end(), render(targets, '\\"' if kind == STRING
                                                         else '"'), targets, droppable))

    def edits(self):
        found = []
        for m in CITATION.finditer(self.text):
            self.citation(m, found)
        for regex in (PAREN, DECISION, CUED):
            for m in regex.finditer(self.text):
                self.short_form(m, regex, found)
        found.sort(key=lambda e: e.start)
        out, last = [], -1
        for e in found:
            if e.start >= last:
                out.append(e)
                last = e.end
        # A short citation in parentheses of what the header comment or the same comment
        # already cites is dropped: "/* ---- inputs (7.1) ---- */" becomes "/* ---- inputs ---- */".
        header, cited = None, {}
        for e in out:
            reg = self.region(e.start)
            if header is None:
                header = reg if self.line_of(reg[0]) <= 3 else (-1, -1)
            seen = cited.setdefault(reg, set()) | cited.get(header, set())
            if e.droppable and e.shown <= seen:
                e.start, e.end, e.text = e.start - 2, e.end + 1, ""
                before = re.search(r'[ \t]*\n[ \t]*(?:\*|//|#)?[ \t]*$', self.text[:e.start + 1])
                if before:  # "(7.5)" opened the line: join what follows to the line above
                    e.start = before.start()
            cited[reg] |= e.shown
        return out

    def rewrite(self):
        edits = self.edits()
        text = self.text
        old = self.text.split("\n")
        for e in reversed(edits):
            width = max(len(l) for l in old[self.line_of(e.start) - 1:self.line_of(e.end)])
            text = text[:e.start] + MARK + chr(0xE000 + min(width, 4095)) + e.text + \
                text[e.end:]
        text = merge_adjacent(text)
        lines = text.split("\n")
        edited = []
        for i, line in enumerate(lines):
            widths = [ord(c) - 0xE000 for c in re.findall(MARK + "(.)", line)]
            if widths:
                edited.append((i, max(widths)))
        lines = [re.sub(MARK + ".", "", l) for l in lines]
        for i, old_width in reversed(edited):
            if old_width > LIMIT:
                continue  # a long line before (a table row): left as it is
            if not reflow(lines, i, old_width, self.path.endswith(".md")):
                self.problems.append("%s:%d: over %d columns, wrap by hand" %
                                     (self.path, i + 1, LIMIT))
        return "\n".join(lines)


# ---- refilling a comment paragraph that an edit made too long -------------------------------

COMMENT_LINE = re.compile(r'^(?P<lead>[ \t]*)(?P<mark>/\*+ |\* |// |# )(?P<body>.*)$')
LIST_ITEM = re.compile(r'^(?:\s|[-|*+]\s|\d+[.)] |---|\*/)')


def words(text):
    """Blank-separated words; a docs citation is one word, so it never breaks."""
    out = []
    for m in re.finditer(r'\S*?' + RENDERED.pattern + r'\S*|\S+', text):
        if m.group(0) == "*/" and out:
            out[-1] += " */"  # never alone on a line
        else:
            out.append(m.group(0))
    return out


def reflow(lines, i, old_width, markdown):
    """Refills the comment paragraph from lines[i] down when lines[i] grew past LIMIT, to the
    width the paragraph had. False when it cannot (not a comment line, or Markdown)."""
    line = lines[i]
    if len(line) <= LIMIT:
        return True
    m = COMMENT_LINE.match(line)
    if not m or markdown:
        return False
    hang = "" if m.group("mark").startswith("/*") else re.match(r'\s*', m.group("body")).group(0)
    cont = m.group("lead") + (" * " if m.group("mark").startswith("/*") else m.group("mark")) + hang
    first = line[:m.end("mark")] + hang  # a hanging indent (" *   text") is kept

    def inside(k):  # lines[k] continues the paragraph of lines[k - 1]
        return (lines[k].startswith(cont) and "*/" not in lines[k - 1] and
                lines[k][len(cont):].strip() and not LIST_ITEM.match(lines[k][len(cont):]))
    top = i
    while top > 0 and not first.lstrip().startswith("/*") and inside(top) and \
            COMMENT_LINE.match(lines[top - 1]):
        top -= 1
    width = min(LIMIT, max([old_width] + [len(l) for l in lines[top:i]]))
    j = i + 1
    # a line that ends a sentence well short of the width was broken there on purpose
    while j < len(lines) and inside(j) and not (
            j > i + 1 and re.search(r'[.:;]$', lines[j - 1]) and len(lines[j - 1]) < width - 12):
        j += 1
    width = min(LIMIT, max([width] + [len(l) for l in lines[i + 1:j]]))
    body = " ".join(l[len(first if k == i else cont):].strip() for k, l in enumerate(lines[i:j], i))
    out, cur = [], first
    for w in words(body):
        if cur not in (first, cont) and len(cur) + 1 + len(w) > width:
            out.append(cur)
            cur = cont
        cur += ("" if cur in (first, cont) else " ") + w
    out.append(cur)
    lines[i:j] = out
    return all(len(l) <= LIMIT for l in out)


# ---- driver ---------------------------------------------------------------------------------

def files_under(paths):
    for p in paths:
        if os.path.isdir(p):
            for d, subdirs, names in os.walk(p):
                subdirs[:] = sorted(s for s in subdirs if not s.startswith(".") and s != "build")
                for name in sorted(names):
                    yield os.path.join(d, name)
        else:
            yield p


def skipped(path, root):
    rel = os.path.relpath(os.path.abspath(path), root).replace(os.sep, "/")
    return rel.startswith(("docs/", "tests/golden/expected/"))


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+", metavar="PATH")
    ap.add_argument("--dry-run", action="store_true", help="print a diff, change nothing")
    ap.add_argument("--mentions", action="store_true",
                    help='also list comments that mention "the spec" without a section')
    args = ap.parse_args(argv)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    table = load_mapping(MAPPING)
    check_headings(table, root)
    problems, changed = [], 0
    for path in files_under(args.paths):
        if not wanted(path) or skipped(path, root):
            continue
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as e:
            problems.append("%s: cannot read: %s" % (path, e))
            continue
        before = File(path, text, table, problems)
        new = before.rewrite()
        after = File(path, new, table, [])
        new_lines = new.split("\n")
        for m in RESIDUAL.finditer(new):
            n = after.line_of(m.start())
            said = any(u in re.sub(r'\s+', ' ', new_lines[n - 1]) for u in before.unmapped)
            if after.kinds[m.start()] in (COMMENT, STRING) and n not in after.keep and not said:
                problems.append("%s:%d: still cites the spec: %s" %
                                (path, n, new_lines[n - 1].strip()))
        # a bare section number ("the formula of 7.5") the grammar does not take as a citation
        cited = after.cited_spans()
        for m in BARE.finditer(new):
            n = after.line_of(m.start())
            if VALUE_BEFORE.search(new[max(0, m.start() - 24):m.start()]) or \
                    VALUE_AFTER.match(new, m.end()):
                continue
            if (after.kinds[m.start()] == COMMENT and n not in after.keep and
                    any((spec, m.group(0)) in table for spec in SPEC_FILES) and
                    not any(a <= m.start() < b for a, b in cited)):
                problems.append("%s:%d: a bare section number? %s" %
                                (path, n, new_lines[n - 1].strip()))
        if args.mentions:
            for m in MENTION.finditer(new):
                n = after.line_of(m.start())
                if after.kinds[m.start()] == COMMENT and n not in after.keep:
                    problems.append("%s:%d: mentions the spec: %s" %
                                    (path, n, new_lines[n - 1].strip()))
        if new == text:
            continue
        changed += 1
        if args.dry_run:
            sys.stdout.writelines(difflib.unified_diff(
                text.splitlines(True), new.splitlines(True), "a/" + path, "b/" + path))
        else:
            with open(path, "w", encoding="utf-8") as out:
                out.write(new)
    problems = list(dict.fromkeys(problems))
    for p in problems:
        print(p, file=sys.stderr)
    print("cite_docs: %d file(s) %s, %d line(s) left for a human" %
          (changed, "would change" if args.dry_run else "changed", len(problems)),
          file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
