from agora.worker.app import main

main()
