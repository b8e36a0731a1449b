from agora.debate.app import main

main()
