# bash completion for shmctl(8): objects, commands, options, file names, and
# cache names from the loader (shmctl -j cache list; without a loader it reads
# the control segments, see shmctl(8)).

_shmctl_caches()
{
	local root=$1 out
	out=$(shmctl ${root:+-r "$root"} -j cache list 2>/dev/null) || return
	# cache names are [A-Za-z0-9_.-]: no quoting to undo
	grep -o '"name": *"[^"]*"' <<<"$out" | sed 's/.*"\([^"]*\)"$/\1/'
}

_shmctl()
{
	local cur prev words cword
	_init_completion || return

	local global_opts='-j --json -p --pretty -r --root --progress -h --help -V --version'
	local objects='image cache hugepages doctor bpf help version'
	local image_cmds='build join upgrade diff apply get inspect verify dump help'
	local cache_cmds='list status stats get load readers reload rollback drop set remove apply compact help'
	local hugepages_cmds='plan reserve help'
	local doctor_cmds='check help'
	local bpf_cmds='export status unexport help'
	local build_opts='-o --output --format --type --tsv-expires --on-duplicate --name --seed
		--created --buckets --load-factor --no-dedup --lossy-f32 --threads --part --filter-part
		--memory-limit --tmpdir --delta-of --after --tsv-removes --hash-bits'
	local rebuild_opts='-o --output --threads --memory-limit --tmpdir'

	case $prev in
	-r | --root | --tmpdir)
		_filedir -d
		return
		;;
	-o | --output | --delta-of | --after)
		_filedir
		return
		;;
	--format)
		COMPREPLY=($(compgen -W 'jsonl tsv' -- "$cur"))
		return
		;;
	--type)
		COMPREPLY=($(compgen -W 'bytes string i64 bool f64 f32list f64list i64list strlist' -- "$cur"))
		return
		;;
	--on-duplicate)
		COMPREPLY=($(compgen -W 'error first last' -- "$cur"))
		return
		;;
	--page-size)
		COMPREPLY=($(compgen -W '2M 1G' -- "$cur"))
		return
		;;
	--numa)
		COMPREPLY=($(compgen -W 'none local node= interleave replicate' -- "$cur"))
		[[ ${COMPREPLY[0]} == *= ]] && compopt -o nospace
		return
		;;
	--name | --seed | --created | --buckets | --load-factor | --hash-bits | --copies | \
		--prefix | --max-value | --threads | --memory-limit | --part)
		return
		;;
	esac

	# find the object and the command, and -r ROOT for cache names
	local i obj='' cmd='' root='' nargs=0
	for ((i = 1; i < cword; i++)); do
		case ${words[i]} in
		-r | --root | -o | --output | --format | --type | --on-duplicate | --name | \
			--seed | --created | --buckets | --load-factor | --hash-bits | --copies | \
			--page-size | --prefix | --max-value)
			[[ ${words[i]} == -r || ${words[i]} == --root ]] && root=${words[i + 1]}
			((i++))
			;;
		--root=*) root=${words[i]#--root=} ;;
		-*) ;;
		*)
			if [[ -z $obj ]]; then
				obj=${words[i]}
			elif [[ -z $cmd ]]; then
				cmd=${words[i]}
			else
				((nargs++))
			fi
			;;
		esac
	done

	if [[ -z $obj ]]; then
		if [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W "$global_opts" -- "$cur"))
		else
			COMPREPLY=($(compgen -W "$objects" -- "$cur"))
		fi
		return
	fi
	case $obj in
	help)
		[[ -z $cmd ]] && COMPREPLY=($(compgen -W 'image cache hugepages doctor bpf' -- "$cur"))
		return
		;;
	im | ima | imag | image) obj=image ;;
	c | ca | cac | cach | cache) obj=cache ;;
	hu* | hugepages) [[ hugepages == "$obj"* ]] && obj=hugepages || return ;;
	d* | doctor) [[ doctor == "$obj"* ]] && obj=doctor || return ;;
	b | bp | bpf) obj=bpf ;;
	*) return ;;
	esac
	if [[ -z $cmd ]]; then
		if [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W "$global_opts" -- "$cur"))
		else
			local list=${obj}_cmds
			COMPREPLY=($(compgen -W "${!list}" -- "$cur"))
		fi
		return
	fi
	if [[ $cur == -* ]]; then
		case $obj/$cmd in
		image/b*) COMPREPLY=($(compgen -W "$build_opts $global_opts" -- "$cur")) ;;
		image/j* | image/u* | image/di*)
			COMPREPLY=($(compgen -W "$rebuild_opts $global_opts" -- "$cur"))
			;;
		image/a*) COMPREPLY=($(compgen -W "$rebuild_opts --as-delta $global_opts" -- "$cur")) ;;
		cache/statu | cache/status) COMPREPLY=($(compgen -W "--all $global_opts" -- "$cur")) ;;
		cache/stat | cache/stats) COMPREPLY=($(compgen -W "--prometheus $global_opts" -- "$cur")) ;;
		cache/lo*) COMPREPLY=($(compgen -W "--numa $global_opts" -- "$cur")) ;;
		cache/se*) COMPREPLY=($(compgen -W "--type --expires $global_opts" -- "$cur")) ;;
		hugepages/p*) COMPREPLY=($(compgen -W "--copies --numa $global_opts" -- "$cur")) ;;
		hugepages/r*)
			COMPREPLY=($(compgen -W "--copies --page-size --persist --no-mount --numa $global_opts" \
				-- "$cur"))
			;;
		bpf/e*) COMPREPLY=($(compgen -W "--prefix --max-value $global_opts" -- "$cur")) ;;
		*/g*) COMPREPLY=($(compgen -W "--key-base64 $global_opts" -- "$cur")) ;;
		*) COMPREPLY=($(compgen -W "$global_opts" -- "$cur")) ;;
		esac
		return
	fi
	case $obj/$cmd in
	image/*)
		# build: inputs; join, upgrade, diff, apply: images; get, inspect,
		# verify, dump: the image file
		[[ $cmd == g* && $nargs -ge 1 ]] && return # the KEY
		_filedir
		;;
	hugepages/p* | hugepages/r*) _filedir shmkv ;;
	cache/stat | cache/stats)
		COMPREPLY=($(compgen -W "$(_shmctl_caches "$root")" -- "$cur"))
		;;
	bpf/e* | bpf/s* | bpf/u*)
		((nargs == 0)) && COMPREPLY=($(compgen -W "$(_shmctl_caches "$root")" -- "$cur"))
		;;
	cache/st* | cache/g* | cache/rea* | cache/rel* | cache/ro* | cache/d* | cache/lo* | \
		cache/se* | cache/rem* | cache/a* | cache/c*)
		if ((nargs == 0)); then
			COMPREPLY=($(compgen -W "$(_shmctl_caches "$root")" -- "$cur"))
		elif [[ $cmd == lo* && $nargs -eq 1 ]]; then
			_filedir shmkv
		elif [[ $cmd == a* && $nargs -eq 1 ]]; then
			_filedir delta
		fi
		;;
	esac
} &&
	complete -F _shmctl shmctl
