"""``python -m bayes_attn.cli``: the ``bayes-attn`` command line."""

if __name__ == "__main__":
    from bayes_attn.cli import run

    run()
