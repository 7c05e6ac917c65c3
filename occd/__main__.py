from occd.cli.main import main

main()
