"""``python -m scripts.relay_cost``: see scripts/relay_cost/run.py."""

from scripts.relay_cost.run import main

if __name__ == "__main__":
    main()
