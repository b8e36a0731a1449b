from agora.registry.app import main

main()
