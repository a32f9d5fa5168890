module mcpmeter.test/origin

go 1.19
