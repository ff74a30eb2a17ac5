module selecthost

go 1.22
