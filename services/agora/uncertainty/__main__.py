from agora.uncertainty.app import main

main()
