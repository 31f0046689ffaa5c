"""PyTorch's pytest.ini, reduced to what meets testcurator's own pytest runs (a helper module
beside the runner tests, like ray_cluster.py; not PyTorch's file)."""

import textwrap

PYTORCH_LIKE_INI = textwrap.dedent('''\
    [pytest]
    addopts =
        -rEfX
        --tb=native
        --capture=sys
        -p no:warnings
        --assert=plain
    xfail_strict = True
    markers =
        serial: marks tests as needs to be run serially
    ''')
