module kubesched.local/bench/rawbinder

go 1.22
