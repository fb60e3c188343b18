"""``python -m t2n.cli``: the same as the ``t2n`` console script."""

from t2n.cli import main

if __name__ == "__main__":
    main()
