from agora.console.app import main

main()
