# The OCI images: one per role of modules/deployment.json's `images` list,
# and the tool image (docs/tool-image.md, "For deployment"), each a
# dockerTools.streamLayeredImage with its ID (the config digest,
# sha256:<64 hex>) recorded at build time, so that units and brokerd's
# config name images by ID and nothing is ever pulled.
#
# Invariant: a role image holds its binary, /etc/passwd and /etc/group with
# its user (from deployment.json's users, never restated here), and the CA
# bundle only where the role speaks TLS; nothing else (no shell, no loader:
# every binary is static). The image's `created` is dockerTools' default,
# 1970-01-01T00:00:01Z, so a build is reproducible.
{ pkgs, lib ? pkgs.lib, binaries ? (import ../nix { inherit pkgs; }).binaries }:

let
  deployment = builtins.fromJSON (builtins.readFile ../modules/deployment.json);
  userOf = role: lib.findFirst (u: u.role == role) null deployment.users;

  # Roles that open TLS connections themselves: gatewayd (Mattermost),
  # memoryd (Honcho), inferproxy (llama-server over the tailnet). An image
  # entry may say so itself with "tls".
  speaksTLS = img: img.tls or (lib.elem img.role [ "gatewayd" "memoryd" "inferproxy" ]);

  cacert = pkgs.runCommand "boxmaker-cacert" { } ''
    mkdir -p $out/etc/ssl/certs
    cp ${pkgs.cacert}/etc/ssl/certs/ca-bundle.crt $out/etc/ssl/certs/ca-certificates.crt
  '';

  etcFor = name: u: pkgs.runCommand "${name}-etc" { } ''
    mkdir -p $out/etc
    cat > $out/etc/passwd <<PASSWD
    root:x:0:0:root:/:/sbin/nologin
    ${u.name}:x:${toString u.uid}:${toString u.gid}:${u.name}:/:/sbin/nologin
    PASSWD
    cat > $out/etc/group <<GROUP
    root:x:0:
    ${u.name}:x:${toString u.gid}:
    GROUP
  '';

  # The ID: the sha256 of the config blob the stream names in manifest.json.
  idOf = stream: lib.fileContents (pkgs.runCommand "${stream.name}-id" { nativeBuildInputs = [ pkgs.jq pkgs.gnutar ]; } ''
    ${stream} > image.tar
    config=$(tar -xOf image.tar manifest.json | jq -r '.[0].Config')
    echo "sha256:$(tar -xOf image.tar "$config" | sha256sum | cut -d' ' -f1)" > $out
  '');

  roleImage = img: let
    u = userOf img.role;
    stream = pkgs.dockerTools.streamLayeredImage {
      inherit (img) name;
      contents = [ binaries.${img.binary} (etcFor img.name u) ] ++ lib.optional (speaksTLS img) cacert;
      config = {
        User = "${toString u.uid}:${toString u.gid}";
        Entrypoint = [ "/bin/${img.binary}" ];
      };
    };
  in { inherit stream; id = idOf stream; };

  # docs/tool-image.md: toolkit, static busybox with its applet links, the
  # CA bundle, root and nobody, empty /tmp /run /work; no Entrypoint, Cmd
  # or User (the runner sets them), PATH=/bin only.
  toolEtc = pkgs.runCommand "boxmaker-tool-etc" { } ''
    mkdir -p $out/etc
    printf 'root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n' > $out/etc/passwd
    printf 'root:x:0:\nnogroup:x:65534:\n' > $out/etc/group
  '';
  toolImage = img: let
    stream = pkgs.dockerTools.streamLayeredImage {
      inherit (img) name;
      contents = [ binaries.toolkit pkgs.pkgsStatic.busybox cacert toolEtc ];
      extraCommands = ''
        mkdir -p tmp run work usr/bin
        chmod 1777 tmp
        ln -s /bin/busybox usr/bin/env
      '';
      config.Env = [ "PATH=/bin" ];
    };
  in { inherit stream; id = idOf stream; };
in
lib.listToAttrs (map (img: lib.nameValuePair img.role (if userOf img.role == null then toolImage img else roleImage img)) deployment.images)
