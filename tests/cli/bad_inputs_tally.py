"""Count tried / clean bad-input cases per subcommand, without stopping at the first problem (the
property test in test_bad_inputs.py stops and shrinks). Run by hand:

    .venv/bin/python tests/cli/bad_inputs_tally.py [CASES_PER_COMMAND]
"""

from __future__ import annotations

import sys
import tempfile
import warnings
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
warnings.simplefilter("ignore")  # hypothesis warns that .example() is for interactive use: this is

from test_bad_inputs import COMMANDS, _make_record, iter_cases, run_case  # noqa: E402


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    template = Path(tempfile.mkdtemp(prefix="vibe-tally-")) / "avibe.db"
    _make_record(template)
    total = Counter[str]()
    for command in COMMANDS:
        tried = clean = 0
        problems = Counter[str]()
        for case in iter_cases(command, count):
            outcome = run_case(case, template)
            tried += 1
            clean += not outcome.problems
            for problem in outcome.problems:
                problems[
                    f"{problem.split(':')[0]} ({' '.join(case.args[:2])}{' ' + case.why if case.why else ''})"
                ] += 1
        total.update(tried=tried, clean=clean)
        print(f"{command:<15} tried {tried:>4}  clean {clean:>4}")
        for problem, n in problems.most_common(5):
            print(f"    {n:>3} x {problem[:150]}")
    print(f"{'all':<15} tried {total['tried']:>4}  clean {total['clean']:>4}")


if __name__ == "__main__":
    main()
