# Writes the GNU ld version script of one library (-v lib=NAME) from symbols.tsv:
# one block per node in declaration order, each inheriting the one before it; the first
# block hides everything not listed.
BEGIN { FS = "\t" }
/^#/ || NF < 3 || $1 != lib { next }
$2 == "-" { order[++n] = $3; next }
{ syms[$3] = syms[$3] "\t\t" $2 ";\n" }
END {
	for (i = 1; i <= n; i++) {
		printf "%s {\n", order[i]
		if (syms[order[i]] != "")
			printf "\tglobal:\n%s", syms[order[i]]
		if (i == 1)
			printf "\tlocal: *;\n"
		printf "}%s;\n", (i > 1 ? " " order[i - 1] : "")
	}
}
