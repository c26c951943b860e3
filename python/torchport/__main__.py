from torchport._cli import main

main()
