from agora.escalation.app import main

main()
