from agora.planner.app import main

main()
