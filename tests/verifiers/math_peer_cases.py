r"""(gold, completion, expected) cases for the ``math`` verifier's differential tests against Math-Verify 0.9.0.

Written for Seedbed (none is copied from Math-Verify's own suite). ``expected`` is the verdict of
``math_verify.verify(parse(gold), parse(completion))`` as its authors ship it, which is also the right one for
every case here (``test_math_peer.py`` checks both). Golds are written the way Math-Verify's tests and the
MATH-style datasets write them: LaTeX inside ``$…$``, plain numbers bare.

Grouped by what they exercise; the first five groups are bugs users reported.
"""

B = r"\boxed"

CASES = {
    # 1. several boxes are one answer, a set or a tuple
    "boxes": [
        (r"$\{-2, 1\}$", rf"The roots are {B}{{-2}} and {B}{{1}}.", 1),
        (r"$\{-2, 1\}$", rf"So $x={B}{{1}}$ or $x={B}{{-2}}$.", 1),
        (r"$-2, 1$", rf"Solutions: {B}{{-2}}, {B}{{1}}", 1),
        (r"$(-2, 1)$", rf"The point has coordinates {B}{{-2}}, {B}{{1}}.", 1),
        (r"$\{1, 2, 3\}$", rf"{B}{{1}}, {B}{{2}} and {B}{{3}}", 1),
        (r"$\{1, 2\}$", rf"{B}{{1}}\quad{B}{{2}}", 1),
        (r"$\{1, 2\}$", rf"{B}{{1}}, {B}{{3}}", 0),
        (r"$\{-2, 1\}$", rf"First root {B}{{-2}}; the second one is {B}{{1}}", 1),
        ("$5$", rf"I got {B}{{3}} at first. Then I noticed the sign error in step two: {B}{{5}}", 1),
        ("$3$", rf"I got {B}{{3}} at first. Then I noticed the sign error in step two: {B}{{5}}", 0),
        ("$4$", rf"{B}{{4}} {B}{{4}}", 1),
        (r"$\frac{1}{2}, \frac{1}{3}$", rf"{B}{{\frac{{1}}{{2}}}} and {B}{{\frac{{1}}{{3}}}}", 1),
    ],
    # 2. an answer marker mid-line, and one that opens a display block
    "markers": [
        ("$3$", "We isolate x, so the Final Answer: $x=3$", 1),
        ("$3$", "After simplifying we find Answer: $3$.", 1),
        ("$3$", "Collecting terms.\nAnswer:\n$$\nx = 3\n$$\nThat is all.", 1),
        (r"$\frac{1}{2}$", "Thus.\nFinal answer:\n\\[\n\\frac{1}{2}\n\\]", 1),
        ("$7$", "Final Answer: The final answer is $7$. I hope it is correct.", 1),
        ("$7$", "Final Answer: The final answer is $8$. I hope it is correct.", 0),
        ("$12$", "Work...\nAnswer: $12$. This is probably right, though maybe I slipped.", 1),
        ("$12$", "**Answer:** 12", 1),
        ("$42$", "The final answer is 42", 1),
        ("$42$", "Reasoning...\nFinal answer: 42", 1),
        ("$42$", "Reasoning...\nFinal answer: 41", 0),
        (r"$\frac{1}{4}$", "Reasoning...\nAnswer: $\\frac{1}{4}$.", 1),
        # boxes used for working before the final answer's marker: the later marker wins, as in Math-Verify
        ("$1530$", rf"Rent is {B}{{1200}} and food {B}{{330}}, in all \$1,530. The final answer is $1,530$.", 1),
        ("$330$", rf"Rent is {B}{{1200}} and food {B}{{330}}, in all \$1,530. The final answer is $1,530$.", 0),
        # a box that straddles math delimiters
        (r"$\{12, 13\}$", rf"The sum lies between ${B}{{12 $ and $13}}$.", 1),
    ],
    # 3. "\$" inside a box is a dollar sign, not a math delimiter
    "dollar": [
        ("$16386.20$", rf"The total is {B}{{\$16,386.20}}.", 1),
        (r"$\$16,386.20$", rf"The total is {B}{{\$16,386.20}}.", 1),
        ("$5$", rf"It costs {B}{{\$5}}", 1),
        ("$6$", rf"It costs {B}{{\$5}}", 0),
        ("$12.50$", rf"Each ticket is {B}{{\$12.50}}.", 1),
    ],
    # 4. identical answers that sympy cannot compare (12:00 parses to zoo)
    "identical": [
        ("$12:00$", rf"{B}{{12:00}}", 1),
        ("$3:30$", rf"The train leaves at {B}{{3:30}}.", 1),
        ("$3:30$", rf"The train leaves at {B}{{3:45}}.", 0),
    ],
    # 5. thousands separators: comma, space, LaTeX's {,}
    "thousands": [
        ("1 000", "The answer is 1 000", 1),
        ("1000", "Answer: 1 000", 1),
        ("1000000", "Final answer: 1 000 000", 1),
        ("$1000$", rf"{B}{{1,000}}", 1),
        ("$1000$", rf"{B}{{1{{,}}000}}", 1),
        ("$1001$", rf"{B}{{1,000}}", 0),
        ("1,234", "Answer: 1234", 1),
        ("$1234567$", rf"{B}{{1,234,567}}", 1),
    ],
    # sets (gold a set: any order)
    "sets": [
        (r"$\{1, 2\}$", rf"{B}{{\{{2, 1\}}}}", 1),
        (r"$\{1, 2\}$", rf"{B}{{\{{1, 3\}}}}", 0),
        (r"$\{1, 2\}$", rf"{B}{{1, 2}}", 1),
        (r"$\{1, 2, 3\}$", rf"{B}{{\{{1, 2\}}}}", 0),
        (r"$\{-1, 0, 1\}$", rf"{B}{{\{{0, 1, -1\}}}}", 1),
    ],
    # intervals (bounds fixed, open/closed matter)
    "intervals": [
        ("$[1, 2)$", rf"{B}{{[1, 2)}}", 1),
        ("$[1, 2)$", rf"{B}{{(1, 2)}}", 0),
        (r"$(-\infty, 3]$", rf"{B}{{(-\infty, 3]}}", 1),
        (r"$(-\infty, 3]$", rf"{B}{{(-\infty, 3)}}", 0),
        (r"$(0, \infty)$", rf"{B}{{(0,\infty)}}", 1),
        (r"$[2, 5]$", rf"{B}{{\left[2, 5\right]}}", 1),
    ],
    # fractions
    "fractions": [
        ("0.5", rf"{B}{{\frac{{1}}{{2}}}}", 1),
        (r"$\frac{1}{2}$", rf"{B}{{0.5}}", 1),
        (r"$\frac{3}{4}$", rf"{B}{{\dfrac{{3}}{{4}}}}", 1),
        (r"$\frac{2}{3}$", rf"{B}{{2/3}}", 1),
        (r"$\frac{1}{3}$", rf"{B}{{0.33}}", 0),
        (r"$\frac{6}{4}$", rf"{B}{{\frac32}}", 1),
        (r"$-\frac{1}{2}$", rf"{B}{{\frac{{1}}{{2}}}}", 0),
        (r"$\frac{\sqrt{3}}{2}$", rf"{B}{{\frac{{\sqrt{{3}}}}{{2}}}}", 1),
    ],
    # percentages
    "percent": [
        ("$50$", rf"{B}{{50\%}}", 1),
        ("$0.25$", rf"{B}{{25\%}}", 1),
        (r"$12.5\%$", rf"{B}{{12.5}}", 0),  # Math-Verify drops the % of integers only
        ("$50$", rf"{B}{{30\%}}", 0),
        (r"$20\%$", "So the discount is 20%.\nAnswer: 20%", 1),
    ],
    # units
    "units": [
        ("$10$", rf"{B}{{10 \text{{ cm}}}}", 1),
        ("$12$", rf"{B}{{12\,\mathrm{{m}}}}", 1),
        ("$10$", rf"{B}{{11 \text{{ cm}}}}", 0),
        ("$90$", rf"{B}{{90^\circ}}", 1),
        ("$5$", rf"{B}{{5 \text{{ apples}}}}", 1),
    ],
    # LaTeX vs plain notation
    "latex_plain": [
        (r"$\frac{\pi}{2}$", rf"{B}{{\pi/2}}", 1),
        (r"$\sqrt{8}$", rf"{B}{{2\sqrt{{2}}}}", 1),
        (r"$\sqrt{2}$", rf"{B}{{\sqrt{{3}}}}", 0),
        ("$x^2+2x+1$", rf"{B}{{(x+1)^2}}", 1),
        (r"$\pi$", rf"{B}{{3.14}}", 0),
        ("$x=3$", rf"{B}{{3}}", 1),
        ("$3$", rf"{B}{{x = 3}}", 1),
        ("$3$", rf"{B}{{x = 4}}", 0),
        (r"$\begin{pmatrix}1&2\\3&4\end{pmatrix}$", rf"{B}{{\begin{{pmatrix}}1&2\\3&4\end{{pmatrix}}}}", 1),
    ],
    # negative numbers
    "negative": [
        ("$-7$", rf"{B}{{-7}}", 1),
        ("$-7$", rf"{B}{{7}}", 0),
        ("-3", "Answer: -3", 1),
        ("$-0.5$", rf"{B}{{-\frac{{1}}{{2}}}}", 1),
        ("$-12$", "Final answer: $-12$", 1),
    ],
    # decimal comma (a comma with one or two digits after it, in prose; in a box it is a list)
    "decimal_comma": [
        ("2.5", "Answer: 2,5", 1),
        ("$2.5$", "The final answer is 2,5", 1),
        ("2.5", rf"{B}{{2,5}}", 0),
        (r"$\{2, 5\}$", rf"{B}{{2,5}}", 1),
    ],
    # prose: no box and no marker; strict scores these 0 on purpose, lenient reads them as Math-Verify does
    "prose": [
        ("$3$", "Adding the two gives 3", 1),
        ("$3$", "The result is $3$.", 1),
        ("$15$", "There are 15 apples left in the basket.", 1),
        ("$14$", "There are 15 apples left in the basket.", 0),
        (r"$\frac{1}{2}$", r"Half of them, $\frac{1}{2}$, stay.", 1),
        ("$3$", "I do not know.", 0),
        ("$3$", "", 0),
    ],
    # hedged answers (strict scores them 0 on purpose; Math-Verify takes the first value)
    "hedged": [
        ("$3$", rf"{B}{{3 \text{{ or }} 4}}", 0),  # a set {3, 4} to Math-Verify
        ("$3$", "Answer: 3 or 4", 1),
        ("$5$", "Answer: $5$ (though $6$ is also plausible)", 1),  # a second candidate: strict 0
        ("$5$", "Answer: 5 o 6", 1),  # strict 0
    ],
    # several values where the gold is one: a list, a range, a bound (strict 0 on purpose; Math-Verify reads the first)
    "several": [
        ("$3$", "**Answer:** 3, 4, 5, 6, 7, 8, 9", 1),
        ("$3$", "Answer: between 3 and 5", 1),
        ("$3$", "Answer: at least 3", 1),
        ("$3$", rf"{B}{{\geq 3}}", 1),
        (r"$x \geq 3$", rf"{B}{{x \geq 3}}", 1),  # the gold a bound: strict 1 too
    ],
    # answers read as written: an abbreviation after a marker, a corrected box, a rejected root
    "as_written": [
        ("$6.28$", "Answer: approx. 6.28", 1),
        ("$3$", "Answer: 3 (i.e. $4$ …)", 0),
        ("$5$", "Answer: No. 5", 1),
        ("$64$", rf"I initially thought ${B}{{32}}$, but each chip has two faces, so the total is ${B}{{64}}$.", 1),
        ("$3$", "Answer: $x = 3$ or $x = -3$, but since $x$ is a side length, $x = 3$.", 1),
        ("$-3$", "Answer: $x = 3$ or $x = -3$, but since $x$ is a side length, $x = 3$.", 0),
    ],
}

FLAT = [(group, gold, completion, expected) for group, cases in CASES.items()
        for gold, completion, expected in cases]
