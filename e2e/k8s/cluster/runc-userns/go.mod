module local/runcuserns

go 1.26.8
