from agora.reputation.app import main

main()
