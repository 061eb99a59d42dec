from raftka.cli import main

main()
