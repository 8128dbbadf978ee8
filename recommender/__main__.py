from recommender.cli.app import main

main()
