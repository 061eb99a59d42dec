from raftka.cli.main import main

main()
