from agora.taskboard.app import main

main()
