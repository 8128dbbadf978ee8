"""Layer 7, the command line: the only layer that prints. Entry points: `recommender` (every command group,
recommender.cli.app:main) and `recommend` (the recommend command alone, recommender.cli.recommend_cmd:main: it imports
nothing else, so it starts fast)."""
