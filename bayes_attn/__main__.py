"""``python -m bayes_attn``: the ``bayes-attn`` command line."""

if __name__ == "__main__":
    from bayes_attn.cli import run

    run()
