from agora.allocator.app import main

main()
